"""The HTTP layer: uvicorn's httptools protocol with the service's guards, and its server with
the service's shutdown.

- **Header timeout**: a connection must deliver a request's headers within ``--timeout``
  seconds of opening (or of the request's first byte); one that sends nothing is closed, one
  that sent part of a request is answered 408. Between requests, ``--keep-alive`` seconds of
  idleness close a connection (uvicorn's keep-alive timeout).
- **Connection cap**: past ``--max-connections`` open connections, a new connection's request
  is answered 503 (JSON, ``Retry-After``) and the connection closed.
- **JSON errors**: a request the parser cannot read is answered with the documented JSON error
  (uvicorn answers text/plain).
- **Draining**: on SIGTERM uvicorn asks each connection to shut down. A busy one finishes its
  response and closes; an idle keep-alive one stays open for ``DRAIN_IDLE_S`` (a request may be
  on its way: closing at once resets it), answers what arrives with ``Connection: close``, and
  closes.
- **Exit**: SIGTERM/SIGINT mark the process not ready at once (``/readyz`` answers 503) and,
  once in-flight requests are answered, the process exits with status 0, with one worker or
  several (uvicorn raises the signal again after its shutdown, so the process died of it).
"""

from __future__ import annotations

import contextlib
import json
import signal
from dataclasses import dataclass

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

DRAIN_IDLE_S = 1.0  # how long an idle connection stays open once draining starts


@dataclass
class Lifecycle:
    """What the process is doing, shared by the app (readiness) and the connections."""

    draining: bool = False


def error_bytes(status: int, message: str, extra_headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A whole HTTP response with the service's JSON error body, closing the connection."""
    body = json.dumps({"error": message}).encode("utf-8")
    head = [STATUS_LINE[status], b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body), b"connection: close\r\n"]
    head += [f"{name}: {value}\r\n".encode("latin-1") for name, value in extra_headers]
    return b"".join(head) + b"\r\n" + body


def guarded_protocol(header_timeout_s: float, max_connections: int, lifecycle: Lifecycle):
    """The protocol class for uvicorn's ``http=`` setting, with these limits."""

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._header_timer = None
            self._received = False  # bytes of a request not yet answered
            self._refuse = len(self.connections) > max_connections
            self._arm_header_timer()

        def connection_lost(self, exc) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self._received = True
            super().data_received(data)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm_header_timer()

        def on_headers_complete(self) -> None:
            self._cancel_header_timer()
            if self._refuse:
                self.transport.write(error_bytes(503, f"the service has {max_connections:,} connections open, its "
                                                      f"limit: retry shortly", (("retry-after", "1"),)))
                self.transport.close()
                return
            super().on_headers_complete()
            if lifecycle.draining and self.cycle is not None:
                self.cycle.keep_alive = False

        def on_response_complete(self) -> None:
            self._received = False
            super().on_response_complete()

        def send_400_response(self, msg: str) -> None:
            self.transport.write(error_bytes(400, f"invalid HTTP request: {msg.rstrip('.')}"))
            self.transport.close()

        def shutdown(self) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self._unset_keepalive_if_required()
                self.timeout_keep_alive_task = self.loop.call_later(DRAIN_IDLE_S, self.timeout_keep_alive_handler)
            else:
                self.cycle.keep_alive = False

        def _arm_header_timer(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_too_slow)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.transport.is_closing():
                return
            if self._received:
                self.transport.write(error_bytes(408, f"the request's headers did not arrive within "
                                                      f"{header_timeout_s:g} s"))
            self.transport.close()

    return GuardedHttpToolsProtocol


class DrainingServer(uvicorn.Server):
    """uvicorn's server with the service's signal handling (see the module's *Exit*)."""

    def __init__(self, lifecycle: Lifecycle, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.lifecycle = lifecycle

    def handle_exit(self, sig, frame) -> None:
        self.lifecycle.draining = True
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self):
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
