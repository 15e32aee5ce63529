"""Issue 34, item 15: `qcat serve` and its /openapi.json agree. Schemathesis generates requests
from the served schema (every check, a fixed seed) against a live server, with no failure; and
the four disagreements it found before, one by one."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qcat.serve.config import ServeConfig
from qcat.serve.openapi import openapi_document
from qcat.serve.requests import HTTPProblem, parse_classify_body, parse_classify_query_string

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from serve_load import ServerProcess  # noqa: E402

from tests.test_serve import DEMO, call  # noqa: E402

CONFIG = Path(__file__).parent / "data" / "schemathesis.toml"


@pytest.fixture(scope="module")
def server():
    process = ServerProcess(["--model", str(DEMO), "--no-access-log"], env={"QCAT_RELOAD_TOKEN": ""})
    yield process
    assert process.stop() == 0


@pytest.mark.slow
def test_the_four_disagreements_schemathesis_found(server):
    # GET ?q= is schema-valid: the query's problem is its result, as in a POST (before: 400).
    status, _, body = call(server.port, "GET", "/v1/classify?q=")
    assert status == 200 and body["results"] == [{"query": "", "error": "query '' is empty after normalization"}]
    # "min_score": null is allowed by the schema and means no threshold (before: schema-invalid, 200).
    status, _, body = call(server.port, "POST", "/v1/classify", {"queries": ["lego"], "min_score": None, "k": 3})
    assert status == 200 and len(body["results"][0]["categories"]) == 3
    # 96.0 is an integer in JSON Schema (before: 400).
    status, _, body = call(server.port, "POST", "/v1/classify", {"queries": ["lego"], "k": 96.0})
    assert status == 200 and body == call(server.port, "POST", "/v1/classify", {"queries": ["lego"], "k": 96})[2]
    # No Authorization: 401, as the schema's bearer security says, even with reloading off (before: 403).
    status, headers, body = call(server.port, "POST", "/v1/reload")
    assert status == 401 and headers.get("www-authenticate", headers.get("WWW-Authenticate")) == "Bearer"
    status, _, body = call(server.port, "POST", "/v1/reload", headers={"Authorization": "Bearer x"})
    assert status == 403 and "reloading over HTTP is off" in body["error"]


@pytest.mark.slow
def test_schemathesis_finds_no_failure(server, tmp_path):
    schemathesis = shutil.which("schemathesis") or shutil.which("st")
    if schemathesis is None:
        pytest.skip("schemathesis is not installed (pip install -e \".[test]\")")
    result = subprocess.run([schemathesis, "--config-file", str(CONFIG), "run",
                             f"http://127.0.0.1:{server.port}/openapi.json", "--checks", "all", "--seed", "34",
                             "--no-color"], capture_output=True, timeout=300, cwd=tmp_path)  # its cache goes there
    out = result.stdout.decode(errors="replace")
    assert result.returncode == 0, out[-4000:]
    generated, passed = map(int, re.search(r"(\d+) generated, (\d+) passed", out).groups())
    assert generated == passed >= 200


def test_the_documented_k_and_min_score_bounds_are_the_ones_requests_are_held_to():
    """The schema's k (an integer in 1..max_k) and min_score (a number in [0, 1] or null) against
    the parser, without a server: what the schema allows parses, 96.0 as 96 (JSON Schema's
    integer) and ``?q=`` as one empty query; one past each bound is a 400 naming the field."""
    config = ServeConfig(max_k=50, default_k=7)
    document = openapi_document(config)
    schemas = {p["name"]: p["schema"] for p in document["paths"]["/v1/classify"]["get"]["parameters"]}
    assert (schemas["k"]["minimum"], schemas["k"]["maximum"], schemas["k"]["default"]) == (1, 50, 7)
    assert (schemas["min_score"]["minimum"], schemas["min_score"]["maximum"]) == (0, 1)
    assert parse_classify_body(b'{"queries": ["lego"], "k": 50.0, "min_score": null}', config) == \
        parse_classify_body(b'{"queries": ["lego"], "k": 50}', config)
    assert parse_classify_query_string(b"q=", config).queries == [""]
    assert parse_classify_query_string(b"q=tv", config).k == 7
    for body, message in ((b'{"queries": ["lego"], "k": 51}', "k must lie in 1..50, got 51"),
                          (b'{"queries": ["lego"], "k": 0}', "k must lie in 1..50, got 0"),
                          (b'{"queries": ["lego"], "k": 2.5}', "k must be an integer, got a number with a fraction"),
                          (b'{"queries": ["lego"], "min_score": 1.5}', "min_score must lie in [0, 1]")):
        with pytest.raises(HTTPProblem) as refused:
            parse_classify_body(body, config)
        assert refused.value.status == 400 and refused.value.message.startswith(message), refused.value.message
