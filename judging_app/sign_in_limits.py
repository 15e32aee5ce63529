"""Limits on sign-in attempts, so that tokens cannot be guessed and wrong tokens cannot exhaust a
small host's CPU (each check of a token costs about 72 ms of scrypt).

Wrong tokens are counted per client (its address, as Streamlit sees it) and per judge or admin
named by the token's public ``<id>`` part, over a sliding :data:`WINDOW`. Past the limit
(:data:`PER_CLIENT`, :data:`PER_ACCOUNT`) the client, or every client trying that token id, is
refused for :data:`LOCKOUT` without the token being checked (no scrypt is run). A right token
clears its account's count. The counts live in the app's server process (one process serves
every judge); a restart clears them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict, deque

WINDOW = 300.0  # seconds over which wrong tokens are counted
PER_CLIENT = 10
PER_ACCOUNT = 5
LOCKOUT = 300.0


class Limiter:
    def __init__(self, per_client: int = PER_CLIENT, per_account: int = PER_ACCOUNT, window: float = WINDOW,
                 lockout: float = LOCKOUT, clock=time.monotonic) -> None:
        self.limits = {"client": per_client, "account": per_account}
        self.window, self.lockout, self.clock = window, lockout, clock
        self._failures: dict[tuple[str, str], deque] = defaultdict(deque)
        self._locked_until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def _keys(self, client: str | None, account: str | None) -> list[tuple[str, str]]:
        return [("client", client or "unknown")] + ([("account", account)] if account else [])

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

    def succeeded(self, account: str | None) -> None:
        if account:
            with self._lock:
                self._failures.pop(("account", account), None)
                self._locked_until.pop(("account", account), None)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._locked_until.clear()


LIMITER = Limiter()


def too_many(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return (f"Too many wrong tokens: sign-in is paused for {minutes} minute{'s' * (minutes != 1)}. Check the token "
            "you were given, then try again.")
