"""The service's options, validated when they are made (each error names its flag)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qcat.errors import InputError

RELOAD_TOKEN_ENV = "QCAT_RELOAD_TOKEN"


@dataclass(frozen=True)
class ServeConfig:
    model: Path | None = None  # None: $QCAT_MODEL or the demo model
    backend: str | None = None  # as `qcat classify --backend`
    cutoff: int | None = None  # as `qcat classify --cutoff`
    overrides: bool = True  # the bundle's judged overrides answer first (`--no-overrides`: the model alone)
    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port (the one chosen is printed)
    workers: int = 1
    max_batch: int = 1000  # queries per request
    max_query_length: int = 1000  # characters per query
    max_body_bytes: int = 1 << 20
    timeout_s: float = 5.0  # the headers and the body to arrive, and a request's wait for the model
    max_k: int = 100
    default_k: int = 5
    micro_batch: bool = True
    access_log: bool = True
    drain_s: float = 10.0  # graceful shutdown: how long in-flight requests may finish
    keep_alive_s: float = 5.0  # an idle keep-alive connection is closed after this
    max_connections: int = 1000  # open connections per worker; past it, requests are answered 503

    def __post_init__(self) -> None:
        at_least = {"--workers": (self.workers, 1), "--max-batch": (self.max_batch, 1),
                    "--max-query-length": (self.max_query_length, 1), "--max-body-bytes": (self.max_body_bytes, 64),
                    "--max-k": (self.max_k, 1), "--default-k": (self.default_k, 1),
                    "--max-connections": (self.max_connections, 1)}
        for flag, (value, low) in at_least.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise InputError(f"{flag} must be an integer of at least {low}, got {value!r}")
        if self.default_k > self.max_k:
            raise InputError(f"--default-k ({self.default_k}) must not exceed --max-k ({self.max_k})")
        if not 0 <= self.port <= 65535:
            raise InputError(f"--port must lie in 0..65535, got {self.port}")
        if not self.timeout_s > 0:
            raise InputError(f"--timeout must be positive (seconds), got {self.timeout_s}")
        if not self.keep_alive_s > 0:
            raise InputError(f"--keep-alive must be positive (seconds), got {self.keep_alive_s}")
        if not self.drain_s >= 0:
            raise InputError(f"--drain must be at least 0 (seconds), got {self.drain_s}")
        if not self.host:
            raise InputError("--host must not be empty")
