"""`qcat serve`: a real server on a free loopback port, driven over HTTP."""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_serve import tampered_copy  # noqa: E402
from serve_load import ServerProcess  # noqa: E402

DEMO = REPO / "demo" / "qcat_demo" / "model"
TOKEN = "test-reload-token"


def call(port: int, method: str, path: str, body=None, headers: dict | None = None, timeout: float = 30.0):
    """(status, headers, parsed JSON or text) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    content_type = response.getheader("content-type", "")
    return response.status, dict(response.getheaders()), (json.loads(raw) if "json" in content_type else raw.decode())


@pytest.fixture(scope="module")
def server():
    process = ServerProcess(["--model", str(DEMO), "--max-batch", "50", "--max-body-bytes", "20000",
                             "--max-query-length", "200"], env={"QCAT_RELOAD_TOKEN": TOKEN})
    yield process
    assert process.stop() == 0


@pytest.mark.slow
def test_health_ready_and_model_summary(server):
    assert call(server.port, "GET", "/healthz")[::2] == (200, {"status": "ok"})
    status, _, ready = call(server.port, "GET", "/readyz")
    manifest_hash = hashlib.sha256((DEMO / "manifest.json").read_bytes()).hexdigest()
    assert status == 200 and ready == {"status": "ready", "backend": "hybrid", "bundle_hash": manifest_hash}
    status, _, summary = call(server.port, "GET", "/v1/model")
    manifest = json.loads((DEMO / "manifest.json").read_text())
    assert status == 200
    assert summary["bundle_hash"] == manifest_hash and summary["taxonomy_hash"] == manifest["taxonomy_hash"]
    assert summary["backend"] == "hybrid" and summary["cutoff"] == 1 and summary["labels"] == 579
    assert summary["load_seconds"] > 0 and summary["loaded_at"].endswith("+00:00")


@pytest.mark.slow
def test_results_are_the_objects_of_classify_json(server):
    queries = ["king poster bed", "dior gaudron", "lego", "nintendo switch controller"]
    cli = subprocess.run([sys.executable, "-m", "qcat.cli", "classify", "--json", "-k", "3", *queries],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert cli.returncode == 0, cli.stderr
    expected = [json.loads(line) for line in cli.stdout.splitlines()]
    status, _, body = call(server.port, "POST", "/v1/classify", {"queries": queries, "k": 3})
    assert status == 200 and body["results"] == expected
    assert body["model"]["backend"] == "hybrid"
    status, _, single = call(server.port, "GET", "/v1/classify?q=king%20poster%20bed&k=3")
    assert status == 200 and single["results"] == expected[:1]


def test_min_score_keeps_only_categories_scoring_at_least_it(server):
    queries = ["king poster bed", "dior gaudron", "lego star wars", "usb c cable"]
    status, _, everything = call(server.port, "POST", "/v1/classify", {"queries": queries, "k": 10})
    assert status == 200
    for floor in (0.05, 0.5, 0.9):
        status, _, kept = call(server.port, "POST", "/v1/classify", {"queries": queries, "k": 10, "min_score": floor})
        assert status == 200
        for full, cut in zip(everything["results"], kept["results"]):
            assert cut["categories"] == [c for c in full["categories"] if c["score"] >= floor]
    status, _, single = call(server.port, "GET", "/v1/classify?q=king%20poster%20bed&k=10&min_score=0.05")
    expected = [c for c in everything["results"][0]["categories"] if c["score"] >= 0.05]
    assert status == 200 and single["results"][0]["categories"] == expected
    assert 0 < len(expected) < len(everything["results"][0]["categories"])  # the floor did cut, and not all


def test_a_failing_query_does_not_take_its_batch_down(server):
    status, _, body = call(server.port, "POST", "/v1/classify",
                           {"queries": ["king poster bed", "", "?!", "x" * 201, "lego"]})
    assert status == 200
    results = body["results"]
    assert [("error" in r) for r in results] == [False, True, True, True, False]
    assert results[1] == {"query": "", "error": "query '' is empty after normalization"}
    assert "longer than the limit of 200" in results[3]["error"]
    assert len(results[0]["categories"]) == 5 and results[4]["normalized"] == "lego"


@pytest.mark.parametrize("method, path, body, status, message", [
    ("POST", "/v1/classify", b'{"queries": ["tv"', 400, "not valid JSON"),
    ("POST", "/v1/classify", b'{"queries": ["\xff tv"]}', 400, "not valid UTF-8 (byte 14"),
    ("POST", "/v1/classify", b'["tv"]', 400, "must be a JSON object"),
    ("POST", "/v1/classify", {"queries": "tv"}, 400, "queries must be an array of strings, got string"),
    ("POST", "/v1/classify", {"queries": ["tv", 7]}, 400, "queries[1] must be a string, got number"),
    ("POST", "/v1/classify", {"queries": []}, 400, "queries is empty"),
    ("POST", "/v1/classify", {"query": ["tv"]}, 400, "unknown field 'query'"),
    ("POST", "/v1/classify", {"queries": ["tv"], "k": "5"}, 400, "k must be an integer, got string"),
    ("POST", "/v1/classify", {"queries": ["tv"], "k": True}, 400, "k must be an integer, got boolean"),
    ("POST", "/v1/classify", {"queries": ["tv"], "k": 0}, 400, "k must lie in 1..100, got 0"),
    ("POST", "/v1/classify", {"queries": ["tv"] * 51}, 413, "holds 51 queries; the limit is 50"),
    ("POST", "/v1/classify", {"queries": ["tv " * 8000]}, 413, "larger than the limit of 20,000"),
    ("GET", "/v1/classify", None, 400, "parameter q is missing"),
    ("GET", "/v1/classify?q=%FF", None, 400, "not valid UTF-8"),
    ("GET", "/v1/classify?q=tv&q=bed", None, 400, "given 2 times"),
    ("GET", "/v1/classify?q=tv&k=five", None, 400, "k must be an integer written in the digits 0-9, got 'five'"),
    ("GET", "/v1/classify?q=tv&k=5_0", None, 400, "k must be an integer written in the digits 0-9, got '5_0'"),
    ("GET", "/v1/classify?q=tv&k=%D9%A5", None, 400, "k must be an integer written in the digits 0-9, got '٥'"),
    ("GET", "/v1/classify?q=tv&k=%205", None, 400, "k must be an integer written in the digits 0-9, got ' 5'"),
    ("POST", "/v1/classify", b'{"queries": ' + b"[" * 9_000 + b"]" * 9_000 + b"}", 400, "nested too deeply"),
    ("GET", "/v1/classify/?q=tv", None, 404, "no route /v1/classify/"),
    ("GET", "/healthz/", None, 404, "no route /healthz/"),
    ("GET", "/v1/classify?q=tv&lang=en", None, 400, "unknown parameter 'lang'"),
    ("GET", "/v1/classify?q=tv&min_score=1.5", None, 400, "min_score must lie in [0, 1]"),
    ("GET", "/v1/classify?q=tv&min_score=0x1", None, 400, "min_score must be a number in [0, 1] written in the digits"),
    ("GET", "/v1/classify?q=tv&min_score=nan", None, 400, "min_score must be a number in [0, 1] written in the digits"),
    ("POST", "/v1/classify", {"queries": ["tv"], "k": 5.5}, 400, "k must be an integer, got a number with a fraction"),
    ("POST", "/v1/classify", {"queries": ["tv"], "min_score": "0.5"}, 400, "min_score must be a number in [0, 1], got string"),
    ("POST", "/v1/classify", {"queries": ["tv"], "min_score": -0.1}, 400, "min_score must lie in [0, 1]"),
    ("GET", "/v2/classify", None, 404, "no route /v2/classify"),
    ("PUT", "/v1/classify", b"{}", 405, "PUT is not allowed on /v1/classify"),
])
def test_bad_requests_get_a_json_error_naming_the_problem(server, method, path, body, status, message):
    got_status, headers, got = call(server.port, method, path, body)
    assert got_status == status, got
    assert headers["content-type"] == "application/json" and message in got["error"]
    assert call(server.port, "GET", "/healthz")[0] == 200  # the worker is still up


def test_the_http_layer_answers_json_and_the_log_has_no_traceback(server):
    """A request the HTTP parser cannot read gets the documented JSON error, not text/plain; no
    bad request of this module put a traceback in the log."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/classify?q=tv HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head.lower()
    assert json.loads(body)["error"].startswith("invalid HTTP request")
    assert "Traceback" not in server.log()


def test_lone_surrogate_is_a_per_item_error(server):
    status, _, body = call(server.port, "POST", "/v1/classify", b'{"queries": ["\\ud800 tv", "tv"]}')
    assert status == 200
    assert "lone surrogate" in body["results"][0]["error"] and body["results"][1]["categories"]


def test_metrics_count_requests_queries_and_the_model(server):
    from prometheus_client.parser import text_string_to_metric_families

    def sample(text, name, **labels):
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return s.value
        return 0.0

    before = call(server.port, "GET", "/metrics")[2]
    call(server.port, "POST", "/v1/classify", {"queries": ["lego", "tv", ""]})
    call(server.port, "POST", "/v1/classify", b"nope")
    after = call(server.port, "GET", "/metrics")[2]
    assert sample(after, "qcat_queries_classified_total") - sample(before, "qcat_queries_classified_total") == 2
    assert sample(after, "qcat_query_errors_total") - sample(before, "qcat_query_errors_total") == 1
    bad = dict(route="/v1/classify", method="POST", status="400")
    assert sample(after, "qcat_http_requests_total", **bad) - sample(before, "qcat_http_requests_total", **bad) == 1
    count = "qcat_http_request_duration_seconds_count"
    assert sample(after, count, route="/v1/classify") - sample(before, count, route="/v1/classify") == 2
    manifest_hash = hashlib.sha256((DEMO / "manifest.json").read_bytes()).hexdigest()
    assert sample(after, "qcat_model_info", backend="hybrid", bundle_hash=manifest_hash) == 1
    assert sample(after, "qcat_model_reloads_total", result="ok") == 0


@pytest.mark.slow
def test_openapi_document_is_valid_and_lists_exactly_the_routes(server):
    from openapi_spec_validator import validate

    from qcat.serve.app import ROUTES

    status, _, document = call(server.port, "GET", "/openapi.json")
    assert status == 200
    validate(document)
    assert set(document["paths"]) == set(ROUTES)
    assert document["components"]["schemas"]["ClassifyRequest"]["properties"]["queries"]["maxItems"] == 50


@pytest.mark.slow
def test_access_log_is_one_json_line_per_request(server):
    call(server.port, "GET", "/v1/classify?q=lego")
    time.sleep(0.2)
    records = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    last = [r for r in records if r["path"] == "/v1/classify" and r["method"] == "GET" and r["status"] == 200][-1]
    assert last["queries"] == 1 and last["ms"] > 0 and last["client"].startswith("127.0.0.1:")


@pytest.mark.slow
def test_a_body_that_does_not_arrive_in_time_is_408_and_a_backlog_is_shed_with_503():
    import socket

    server = ServerProcess(["--model", str(DEMO), "--timeout", "0.5", "--max-batch", "2000",
                            "--max-body-bytes", str(1 << 22)])
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as slow:
            slow.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"queries\": [")
            response = b""
            while b"did not arrive" not in response:  # the head and the body may come in two reads
                chunk = slow.recv(65536)
                if not chunk:
                    break
                response += chunk
            response = response.decode()
        assert response.startswith("HTTP/1.1 408") and "did not arrive within 0.5 s" in response

        # Requests of 2,000 queries at once, as many as take the model about three deadlines to
        # answer one after another (timed here, since the compiled path is fast on a fast machine):
        # the later ones wait past the 0.5 s deadline in the queue and are shed, not computed.
        queries = [f"king poster bed {i}" for i in range(2000)]
        call(server.port, "POST", "/v1/classify", {"queries": queries})  # warm
        started = time.perf_counter()
        assert call(server.port, "POST", "/v1/classify", {"queries": queries})[0] == 200
        one_request_s = time.perf_counter() - started
        n_requests = min(80, max(6, math.ceil(1.5 / one_request_s) + 2))
        answers = []

        def request():
            answers.append(call(server.port, "POST", "/v1/classify", {"queries": queries}))

        threads = [threading.Thread(target=request) for _ in range(n_requests)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        statuses = sorted(status for status, _, _ in answers)
        assert statuses[0] == 200 and statuses[-1] == 503, statuses
        shed = next((headers, body) for status, headers, body in answers if status == 503)
        assert shed[0]["retry-after"] == "1" and "waited more than 0.5 s for the model" in shed[1]["error"]
        assert call(server.port, "GET", "/v1/classify?q=lego")[0] == 200
    finally:
        server.stop()


# -- reload --------------------------------------------------------------------------


def repoint(link: Path, target: Path) -> None:
    staged = link.with_name("staged")
    staged.symlink_to(target)
    os.replace(staged, link)


@pytest.mark.slow
def test_reload_swaps_a_good_bundle_and_refuses_a_tampered_one(tmp_path):
    good, bad = tmp_path / "nb", tmp_path / "tampered"
    shutil.copytree(DEMO / "nb", good)
    tampered_copy(DEMO / "nb", bad)
    link = tmp_path / "current"
    link.symlink_to(DEMO)
    server = ServerProcess(["--model", str(link)], env={"QCAT_RELOAD_TOKEN": TOKEN})
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        demo_hash = call(server.port, "GET", "/v1/model")[2]["bundle_hash"]
        assert call(server.port, "POST", "/v1/reload")[0] == 401
        assert call(server.port, "POST", "/v1/reload", headers={"Authorization": "Bearer wrong"})[0] == 401

        repoint(link, bad)
        status, _, body = call(server.port, "POST", "/v1/reload", headers=auth)
        assert status == 422 and f"still serving {demo_hash}" in body["error"] and "does not match its hash" in body["error"]
        status, _, answer = call(server.port, "GET", "/v1/classify?q=king%20poster%20bed")
        assert status == 200 and answer["model"]["bundle_hash"] == demo_hash

        repoint(link, good)
        status, _, body = call(server.port, "POST", "/v1/reload", headers=auth)
        good_hash = hashlib.sha256((good / "manifest.json").read_bytes()).hexdigest()
        assert status == 200 and body["previous_bundle_hash"] == demo_hash
        assert body["model"]["bundle_hash"] == good_hash and body["model"]["backend"] == "nb"
        assert call(server.port, "GET", "/v1/classify?q=lego")[2]["model"] == {"backend": "nb", "bundle_hash": good_hash}

        repoint(link, DEMO)  # SIGHUP reloads too
        server.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while call(server.port, "GET", "/readyz")[2]["bundle_hash"] != demo_hash:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        metrics = call(server.port, "GET", "/metrics")[2]
        assert 'qcat_model_reloads_total{result="ok"} 2.0' in metrics
        assert 'qcat_model_reloads_total{result="refused"} 1.0' in metrics
        assert f'bundle_hash="{good_hash}"' not in metrics and f'bundle_hash="{demo_hash}"' in metrics
    finally:
        server.stop()


@pytest.mark.slow
def test_reload_over_http_is_off_without_a_token():
    server = ServerProcess(["--model", str(DEMO / "nb")], env={"QCAT_RELOAD_TOKEN": ""})
    try:
        status, _, body = call(server.port, "POST", "/v1/reload", headers={"Authorization": "Bearer "})
        assert status == 403 and "QCAT_RELOAD_TOKEN" in body["error"]
    finally:
        server.stop()


@pytest.mark.slow
def test_requests_finish_on_the_model_they_started_with():
    """Jobs queued before a reload are answered by their own model, even in one micro-batch."""
    import asyncio

    from qcat.serve.batching import MicroBatcher
    from qcat.serve.config import ServeConfig
    from qcat.serve.loading import load
    from qcat.serve.metrics import ServiceMetrics

    hybrid, nb = load(ServeConfig(model=DEMO)), load(ServeConfig(model=DEMO / "nb"))

    async def scenario():
        batcher = MicroBatcher(ServiceMetrics(), 1000, 1000)
        await batcher.start()
        deadline = asyncio.get_running_loop().time() + 30
        answers = await asyncio.gather(batcher.classify(hybrid, ["lego"], 5, None, deadline),
                                       batcher.classify(nb, ["lego"], 5, None, deadline),
                                       batcher.classify(hybrid, ["tv"], 5, None, deadline))
        await batcher.stop()
        return answers

    answers = asyncio.run(scenario())
    assert [a[0].backend for a in answers] == ["hybrid", "nb", "hybrid"]


# -- processes, shutdown, CLI errors ---------------------------------------------------


@pytest.mark.slow
def test_workers_share_the_port_and_all_reload():
    server = ServerProcess(["--model", str(DEMO), "--workers", "2"], env={"QCAT_RELOAD_TOKEN": TOKEN})
    try:
        nb_hash = hashlib.sha256((DEMO / "nb" / "manifest.json").read_bytes()).hexdigest()
        for _ in range(40):
            assert call(server.port, "GET", "/v1/classify?q=lego")[0] == 200
        time.sleep(0.2)
        pids = {json.loads(line)["pid"] for line in server.log().splitlines() if line.startswith("{")}
        assert len(pids) == 2, "both workers answered"
        status, _, body = call(server.port, "POST", "/v1/reload", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200
        deadline = time.monotonic() + 20
        while server.log().count("reloaded: now serving") < 2:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        assert nb_hash not in server.log()  # the same directory: each worker reloads the demo model

        os.kill(min(pids), signal.SIGKILL)  # a worker dies: the supervisor starts another
        deadline = time.monotonic() + 30
        while "exited; starting another" not in server.log():
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        for _ in range(20):
            assert call(server.port, "GET", "/v1/classify?q=lego")[0] == 200
    finally:
        assert server.stop() == 0


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--port", "99999"], "qcat serve: argument --port: must be in 0..65535, got 99999"),
    (["--model", "/nonexistent/model"], "model directory /nonexistent/model does not exist"),
    (["--workers", "0"], "qcat serve: argument --workers: must be in 1..256, got 0"),
    (["--timeout", "0"], "qcat serve: argument --timeout: must be a number greater than 0, got 0"),
    (["--max-k", "3"], "--default-k (5) must not exceed --max-k (3)"),
])
def test_serve_usage_errors_are_one_line(args, message):
    result = subprocess.run([sys.executable, "-m", "qcat.cli", "serve", *args], capture_output=True, text=True,
                            timeout=60, cwd=REPO)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"qcat: error: {message}"]


@pytest.mark.slow
def test_serve_on_a_port_in_use_is_one_line(server):
    result = subprocess.run([sys.executable, "-m", "qcat.cli", "serve", "--port", str(server.port)],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"qcat: error: cannot listen on 127.0.0.1:{server.port}: Address already in use (choose another --port or --host)"]


@pytest.mark.slow
def test_serving_imports_no_training_code_and_no_tensorflow():
    code = ("import sys; from qcat.serve.config import ServeConfig; from qcat.serve.loading import load; "
            "from qcat.serve.app import create_app; from qcat.serve import runner; "
            "create_app(ServeConfig(), load(ServeConfig())); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'duckdb', 'tf2onnx', 'keras') "
            "or m.startswith(('qcat.training', 'qcat.evaluation', 'qcat.judging'))); print(bad)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
