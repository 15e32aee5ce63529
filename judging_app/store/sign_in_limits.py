"""Limits on sign-in attempts, so that tokens cannot be guessed and wrong tokens cannot exhaust a
small host's CPU (each check of a token costs about 72 ms of scrypt).

Wrong tokens are counted over a sliding :data:`WINDOW`, under three keys:

- per judge or admin named by the token's public ``<id>`` part, from every address
  (:data:`PER_ACCOUNT`): nobody guesses one account's secret from many addresses;
- per (address, token id) (:data:`PER_CLIENT_ACCOUNT`): one person mistyping their own token;
- per address (:data:`PER_CLIENT`), far above what one office produces: a whole team behind one
  address (an office, a reverse proxy) is never locked out by one judge's mistakes; only a flood
  of wrong tokens from one address is.

Past a limit, attempts under that key are refused for :data:`LOCKOUT` without the token being
checked (no scrypt is run). A right token clears its account's counts. The client's address is
the one Streamlit sees, or, behind a reverse proxy named with ``qcat judge app --trusted-proxy
HEADER``, the last address in that request header. The counts live in the app's server process
(one process serves every judge); a restart clears them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict, deque

WINDOW = 300.0  # seconds over which wrong tokens are counted
PER_ACCOUNT = 10
PER_CLIENT_ACCOUNT = 5
PER_CLIENT = 200
LOCKOUT = 300.0
PROXY_HEADER_ENV = "QCAT_TRUSTED_PROXY_HEADER"


def client_address(peer: str | None, headers, proxy_header: str | None) -> str | None:
    """The client's address: the last one in ``proxy_header`` when the app is behind a trusted
    proxy (the address the proxy itself saw; earlier ones the client may have written), else the
    peer's."""
    if proxy_header:
        forwarded = (headers or {}).get(proxy_header) if hasattr(headers, "get") else None
        if forwarded:
            last = str(forwarded).split(",")[-1].strip()
            if last:
                return last[:100]
    return peer if isinstance(peer, str) and peer else None


class Limiter:
    def __init__(self, per_client: int = PER_CLIENT, per_account: int = PER_ACCOUNT,
                 per_client_account: int = PER_CLIENT_ACCOUNT, window: float = WINDOW, lockout: float = LOCKOUT,
                 clock=time.monotonic) -> None:
        self.limits = {"client": per_client, "account": per_account, "client_account": per_client_account}
        self.window, self.lockout, self.clock = window, lockout, clock
        self._failures: dict[tuple[str, str], deque] = defaultdict(deque)
        self._locked_until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def _keys(self, client: str | None, account: str | None) -> list[tuple[str, str]]:
        client = client or "unknown"
        return [("client", client)] + ([("account", account), ("client_account", f"{client} {account}")]
                                       if account else [])

    def wait_seconds(self, client: str | None, account: str | None) -> int:
        """0 when an attempt may be checked now, else the whole seconds until it may."""
        now = self.clock()
        with self._lock:
            waits = [self._locked_until.get(key, 0.0) - now for key in self._keys(client, account)]
        longest = max(waits)
        return math.ceil(longest) if longest > 0 else 0

    def failed(self, client: str | None, account: str | None) -> None:
        now = self.clock()
        with self._lock:
            for key in self._keys(client, account):
                recent = self._failures[key]
                recent.append(now)
                while recent and recent[0] <= now - self.window:
                    recent.popleft()
                if len(recent) >= self.limits[key[0]]:
                    self._locked_until[key] = now + self.lockout
                    recent.clear()

    def succeeded(self, client: str | None, account: str | None) -> None:
        if account:
            with self._lock:
                for key in (("account", account), ("client_account", f"{client or 'unknown'} {account}")):
                    self._failures.pop(key, None)
                    self._locked_until.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._locked_until.clear()


LIMITER = Limiter()


def too_many(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return (f"Too many wrong tokens: sign-in is paused for {minutes} minute{'s' * (minutes != 1)}. Check the token "
            "you were given, then try again.")
