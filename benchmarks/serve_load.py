"""A `qcat serve` process on a free loopback port, and a keep-alive HTTP/1.1 load generator
(asyncio on uvloop over raw sockets, so the client costs as little as it can) to drive it.
Used by benchmarks/bench_serve.py and by the service's soak test."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import numpy as np

REPO = Path(__file__).resolve().parent.parent


class ServerProcess:
    """``qcat serve --port 0 ...`` in a child process; its log goes to a temporary file."""

    def __init__(self, args: list[str], env: dict | None = None, timeout: float = 60.0) -> None:
        self.log_path = Path(tempfile.mkstemp(suffix=".log", prefix="qcat-serve-")[1])
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "qcat.cli", "serve", "--port", "0", *args], cwd=REPO, stdout=log,
                stderr=subprocess.STDOUT, env=os.environ | {"PYTHONPATH": str(REPO)} | (env or {}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log())
            if match:
                self.port = int(match.group(1))
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"qcat serve exited with {self.process.returncode}: {self.log()}")
            time.sleep(0.05)
        self.process.kill()
        raise RuntimeError(f"qcat serve did not start in {timeout:g} s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_mib(self) -> float:
        """Resident memory of the server and its workers."""
        pids = [self.process.pid] + [int(p) for p in Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
                                     .read_text().split()]
        total = 0
        for pid in pids:
            status = Path(f"/proc/{pid}/status").read_text()
            total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
        return total / 1024

    def signal(self, signum: int = signal.SIGHUP) -> None:
        self.process.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        code = self.process.wait(timeout)
        self.log_path.unlink(missing_ok=True)
        return code


def get_request(query: str, k: int = 5) -> bytes:
    return f"GET /v1/classify?q={quote(query)}&k={k} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def post_request(path: str, payload, headers: dict | None = None) -> bytes:
    body = json.dumps(payload).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@dataclass
class LoadResult:
    latencies_ms: np.ndarray
    seconds: float
    statuses: dict = field(default_factory=dict)  # status (or "connection error") -> count
    answers: list = field(default_factory=list)  # (time the request was sent, bundle hash) of 200s, if recorded

    @property
    def bundles(self) -> set:
        """Bundle hashes seen in answers."""
        return {bundle for _, bundle in self.answers}

    @property
    def requests(self) -> int:
        return len(self.latencies_ms)

    @property
    def failures(self) -> int:
        return sum(count for status, count in self.statuses.items() if status != 200)

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if len(self.latencies_ms) else float("nan")

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


async def drive(port: int, requests: list[bytes], clients: int, max_requests: int, seconds: float,
                record_bundles: bool = False) -> LoadResult:
    """``clients`` keep-alive connections send ``requests`` round robin until ``max_requests``
    are answered or ``seconds`` pass. A failed connection is counted and reopened."""
    latencies: list[float] = []
    statuses: dict = {}
    answers: list = []
    budget = [max_requests]
    deadline = time.perf_counter() + seconds

    async def client(offset: int) -> None:
        i = offset
        connection = None
        while budget[0] > 0 and time.perf_counter() < deadline:
            budget[0] -= 1
            request = requests[i % len(requests)]
            i += clients
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection("127.0.0.1", port)
                reader, writer = connection
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
                body = await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                statuses[f"connection error: {type(exc).__name__}"] = statuses.get(f"connection error: {type(exc).__name__}", 0) + 1
                connection = None
                continue
            latencies.append(time.perf_counter() - started)
            status = int(head[9:12])
            statuses[status] = statuses.get(status, 0) + 1
            if record_bundles and status == 200:
                answers.append((started, json.loads(body)["model"]["bundle_hash"]))
        if connection is not None:
            connection[1].close()

    started = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return LoadResult(1000 * np.array(latencies), time.perf_counter() - started, statuses, answers)


def run(coroutine):
    import uvloop

    return uvloop.run(coroutine)
