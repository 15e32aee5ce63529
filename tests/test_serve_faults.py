"""`qcat serve` under the faults a load and fault probe found: slow and idle connections, too
many connections, shutdown with requests on the wire, reloads across workers, request ids, and
micro-batches of requests for different k."""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from serve_load import ServerProcess  # noqa: E402
from test_serve import DEMO, TOKEN, call, repoint  # noqa: E402


def request_bytes(path: str, body: bytes | None = None, headers: str = "") -> bytes:
    if body is None:
        return f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def read_response(sock: socket.socket) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one response on a keep-alive connection."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {raw!r}"
        raw += chunk
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closes ``sock`` within ``seconds``, and what it sent before."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except socket.timeout:
        return False, received
    except ConnectionResetError:
        pass
    return True, received


def test_a_request_id_is_echoed_only_when_it_is_a_plain_token():
    """What test_request_ids_are_echoed_or_made sees over HTTP, in the function that decides it:
    a token of letters, digits and ``._:/+=-`` up to 128 bytes is the response's id; anything else
    (a space, 129 bytes, a quote, a line break, nothing) gets a new 32-hex-digit id, a new one each time."""
    from qcat.serve.app import request_id_of

    assert request_id_of([(b"host", b"x"), (b"x-request-id", b"abc-123.x:/+=_")]) == b"abc-123.x:/+=_"
    assert request_id_of([(b"x-request-id", b"r" * 128)]) == b"r" * 128
    for bad in (b"has space", b"r" * 129, b'quote"d', b"line\nbreak", b""):
        made = request_id_of([(b"x-request-id", bad)])
        assert made != bad and len(made) == 32 and int(made, 16) >= 0, made
    assert request_id_of([]) != request_id_of([])


def test_a_refusal_written_to_the_socket_is_one_json_response_that_closes():
    """The bytes the guarded protocol writes for a 408 or 503 (qcat.serve.http_layer.error_bytes)
    read as one HTTP response: the status, a JSON body of its length, the extra headers, and
    ``Connection: close``."""
    from qcat.serve.http_layer import error_bytes

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(error_bytes(503, "4 connections open: “try again”", (("Retry-After", "1"),)))
        status, headers, body = read_response(theirs)
    assert status == 503 and headers["content-type"] == "application/json" and headers["retry-after"] == "1"
    assert headers["connection"] == "close" and json.loads(body) == {"error": "4 connections open: “try again”"}


@pytest.fixture(scope="module")
def strict_server():
    server = ServerProcess(["--model", str(DEMO / "nb"), "--timeout", "1", "--keep-alive", "1",
                            "--max-connections", "4"])
    yield server
    assert server.stop() == 0


@pytest.mark.slow
def test_idle_connections_and_slow_headers_are_closed(strict_server):
    port = strict_server.port
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as idle:  # sends nothing
        closed, sent = closed_within(idle, 5)
    assert closed and sent == b"" and 0.9 < time.monotonic() - started < 3

    with socket.create_connection(("127.0.0.1", port)) as slow:  # headers that never end
        slow.sendall(b"GET /v1/classify?q=tv HTTP/1.1\r\nHost: x\r\n")
        closed, sent = closed_within(slow, 5)
    assert closed and sent.startswith(b"HTTP/1.1 408")
    assert "headers did not arrive within 1 s" in json.loads(sent.split(b"\r\n\r\n", 1)[1])["error"]

    with socket.create_connection(("127.0.0.1", port)) as kept:  # idle after an answer: keep-alive timeout
        kept.sendall(request_bytes("/v1/classify?q=tv"))
        assert read_response(kept)[0] == 200
        started = time.monotonic()
        closed, sent = closed_within(kept, 5)
    assert closed and sent == b"" and time.monotonic() - started < 3


@pytest.mark.slow
def test_connections_past_the_cap_get_a_json_503(strict_server):
    port = strict_server.port
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    try:
        for sock in held:  # each connection answers, so all four are open on the server
            sock.sendall(request_bytes("/healthz"))
            assert read_response(sock)[0] == 200
        with socket.create_connection(("127.0.0.1", port)) as extra:
            extra.sendall(request_bytes("/v1/classify?q=tv"))
            status, headers, body = read_response(extra)
        assert status == 503 and headers["content-type"] == "application/json" and headers["retry-after"] == "1"
        assert "4 connections open" in json.loads(body)["error"]
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert call(port, "GET", "/v1/classify?q=tv")[0] == 200


@pytest.mark.slow
def test_request_ids_are_echoed_or_made(strict_server):
    port = strict_server.port
    _, headers, _ = call(port, "GET", "/healthz", headers={"X-Request-ID": "abc-123.x"})
    assert headers["x-request-id"] == "abc-123.x"
    _, headers, _ = call(port, "GET", "/healthz")
    made = headers["x-request-id"]
    assert len(made) == 32 and int(made, 16) >= 0
    for bad in ("has space", "x" * 129, "quote\"d"):
        _, headers, _ = call(port, "GET", "/healthz", headers={"X-Request-ID": bad})
        assert headers["x-request-id"] != bad and len(headers["x-request-id"]) == 32
    status, headers, _ = call(port, "GET", "/nowhere", headers={"X-Request-ID": "trace-404"})
    assert status == 404 and headers["x-request-id"] == "trace-404"
    time.sleep(0.2)
    records = [json.loads(line) for line in strict_server.log().splitlines() if line.startswith("{")]
    assert {"abc-123.x", made, "trace-404"} <= {r["request_id"] for r in records}


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_turns_not_ready_and_answers_what_is_on_the_wire(workers):
    """SIGTERM while a request is half sent (its body arrives after the signal), and with idle
    keep-alive connections whose next request arrives during the drain: all are answered, the
    readiness probe says draining at once, and the process exits 0."""
    server = ServerProcess(["--model", str(DEMO), "--workers", str(workers), "--max-batch", "5000",
                            "--max-body-bytes", str(1 << 22)])
    queries = [f"king poster bed {i}" for i in range(2000)]
    body = json.dumps({"queries": queries}).encode()
    connections = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(8)]
    try:
        for sock in connections:  # every connection is open and idle on the server
            sock.sendall(request_bytes("/readyz"))
            assert read_response(sock)[0] == 200
        big, probe, idle = connections[0], connections[1], connections[2:]
        big.sendall(request_bytes("/v1/classify", body)[:-100])  # all but the end of the body
        time.sleep(0.2)
        server.signal(signal.SIGTERM)
        time.sleep(0.05)
        for sock in idle:  # requests already sent on keep-alive connections as the drain starts
            sock.sendall(request_bytes("/v1/classify?q=lego"))
        probe.sendall(request_bytes("/readyz"))
        big.sendall(body[-100:])
        status, headers, ready = read_response(probe)
        if status == 503:  # the probe's worker is draining (with 2 workers, the other one may answer first)
            assert json.loads(ready)["status"] == "draining"
        for sock in idle:
            status, headers, _ = read_response(sock)
            assert status == 200 and headers["connection"] == "close"
        status, _, answer = read_response(big)
        assert status == 200 and len(json.loads(answer)["results"]) == len(queries)
        assert server.process.wait(30) == 0, server.log()
    finally:
        for sock in connections:
            sock.close()
        server.stop()


@pytest.mark.slow
def test_readiness_is_draining_at_once():
    server = ServerProcess(["--model", str(DEMO / "nb"), "--drain", "5"])
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(request_bytes("/readyz"))
            assert read_response(sock)[0] == 200
            server.signal(signal.SIGTERM)
            time.sleep(0.02)  # well inside uvicorn's 0.1 s tick: the flag is set by the signal itself
            sock.sendall(request_bytes("/readyz"))
            status, headers, body = read_response(sock)
        assert status == 503 and json.loads(body)["status"] == "draining" and headers["connection"] == "close"
        assert server.process.wait(30) == 0
    finally:
        server.stop()


@pytest.mark.slow
def test_a_reload_200_means_every_worker_serves_the_new_bundle(tmp_path):
    link = tmp_path / "current"
    link.symlink_to(DEMO)
    server = ServerProcess(["--model", str(link), "--workers", "2"], env={"QCAT_RELOAD_TOKEN": TOKEN})
    nb_hash = hashlib.sha256((DEMO / "nb" / "manifest.json").read_bytes()).hexdigest()
    try:
        repoint(link, DEMO / "nb")
        status, _, body = call(server.port, "POST", "/v1/reload", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and body["model"]["bundle_hash"] == nb_hash
        assert len(body["workers"]) == 2 and {w["bundle_hash"] for w in body["workers"]} == {nb_hash}
        answered_by = set()
        for _ in range(60):  # fresh connections: the kernel spreads them over both workers
            status, _, answer = call(server.port, "GET", "/v1/classify?q=lego", headers={"X-Request-ID": "after"})
            assert status == 200 and answer["model"]["bundle_hash"] == nb_hash
        time.sleep(0.2)
        answered_by = {json.loads(line)["pid"] for line in server.log().splitlines()
                       if line.startswith("{") and '"after"' in line}
        assert answered_by == {w["pid"] for w in body["workers"]}, "both workers answered, from the new bundle"
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_micro_batches_share_one_call_across_k():
    """Requests for k = 1, 5 and 20 share one model call at k = 20, each cut to its own k and
    min_score; a blended hybrid's k = 30 sums over more categories of each part, so it gets a call
    of its own."""
    import asyncio

    from qcat.serve.batching import MicroBatcher
    from qcat.serve.config import ServeConfig
    from qcat.serve.loading import load
    from qcat.serve.metrics import ServiceMetrics

    loaded = load(ServeConfig(model=DEMO))
    metrics = ServiceMetrics()
    asks = [(["king poster bed", "lego"], 1, None), (["dior gaudron"], 5, 0.2), (["usb c cable"], 20, None),
            (["tv stand"], 30, 0.01)]

    async def scenario():
        batcher = MicroBatcher(metrics, 1000, 1000)
        await batcher.start()
        deadline = asyncio.get_running_loop().time() + 30
        answers = await asyncio.gather(*(batcher.classify(loaded, queries, k, floor, deadline)
                                         for queries, k, floor in asks))
        await batcher.stop()
        return answers

    answers = asyncio.run(scenario())
    for (queries, k, floor), got in zip(asks, answers):
        expected = [e.to_json() for e in loaded.classifier.classify(queries, k)]
        for e in expected:
            e["categories"] = [c for c in e["categories"] if floor is None or c["score"] >= floor]
        assert [a.to_json() for a in got] == expected
    calls = metrics.model_calls.collect()[0].samples
    assert next(s.value for s in calls if s.name.endswith("_count")) == 2
