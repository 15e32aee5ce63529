"""Reading and checking what a client sent. Every problem is an ``HTTPProblem`` whose message
names the field, index or byte at fault; per-query problems (empty, too long) are not errors
here: they become per-item errors in the response, like ``qcat classify``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from qcat.serve.config import ServeConfig

CLASSIFY_FIELDS = ("queries", "k", "min_score", "precision")
ASCII_DIGITS = re.compile(r"[0-9]{1,9}")
# A JSON number in the ASCII digits (as OpenAPI clients write a `number` parameter, 1e-05 included);
# float() alone would also take "nan", "inf", "١" and "1_0".
ASCII_DECIMAL = re.compile(r"[+-]?([0-9]{1,40}(\.[0-9]{0,40})?|\.[0-9]{1,40})([eE][+-]?[0-9]{1,3})?")


class HTTPProblem(Exception):
    """A request the service refuses: an HTTP status and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ClassifyRequest:
    queries: list[str]
    k: int
    min_score: float | None = None  # only categories scoring at least this
    precision: float | None = None  # also the deepest node right at least this often (qcat.models.calibration.nodes)


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def check_k(value, config: ServeConfig, field: str = "k") -> int:
    """An integer as JSON Schema reads one: 96 or 96.0 (a number with no fraction), not true or "96"."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a number with a fraction" if isinstance(value, float) else _json_type(value)
        raise HTTPProblem(400, f"{field} must be an integer, got {kind}")
    if not 1 <= value <= config.max_k:
        raise HTTPProblem(400, f"{field} must lie in 1..{config.max_k}, got {value}")
    return value


def check_min_score(value, field: str = "min_score") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HTTPProblem(400, f"{field} must be a number in [0, 1], got {_json_type(value)}")
    if not 0 <= value <= 1:
        raise HTTPProblem(400, f"{field} must lie in [0, 1] (a calibrated probability), got {value}")
    return float(value)


def check_precision(value, field: str = "precision") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HTTPProblem(400, f"{field} must be a number strictly between 0 and 1, got {_json_type(value)}")
    if not 0 < value < 1:
        raise HTTPProblem(400, f"{field} must lie strictly between 0 and 1 (the share of node answers that are right), "
                               f"got {value}")
    return float(value)


def parse_classify_body(body: bytes, config: ServeConfig) -> ClassifyRequest:
    """``{"queries": [...], "k": 5}`` from a POST body."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPProblem(400, f"request body is not valid UTF-8 (byte {exc.start}: {body[exc.start:exc.start + 1]!r})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HTTPProblem(400, f"request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise HTTPProblem(400, "request body is nested too deeply: send a JSON object like "
                               '{"queries": ["..."], "k": 5}') from None
    if not isinstance(data, dict):
        raise HTTPProblem(400, f'request body must be a JSON object like {{"queries": ["..."], "k": 5}}, got {_json_type(data)}')
    unknown = sorted(set(data) - set(CLASSIFY_FIELDS))
    if unknown:
        raise HTTPProblem(400, f"unknown field {unknown[0]!r}; the fields are {', '.join(CLASSIFY_FIELDS)}")
    if "queries" not in data:
        raise HTTPProblem(400, 'field "queries" is missing: give a list of query strings')
    queries = data["queries"]
    if not isinstance(queries, list):
        raise HTTPProblem(400, f"queries must be an array of strings, got {_json_type(queries)}")
    if not queries:
        raise HTTPProblem(400, "queries is empty: give at least one query")
    if len(queries) > config.max_batch:
        raise HTTPProblem(413, f"queries holds {len(queries):,} queries; the limit is {config.max_batch:,} per request")
    for i, query in enumerate(queries):
        if not isinstance(query, str):
            raise HTTPProblem(400, f"queries[{i}] must be a string, got {_json_type(query)}")
    k = check_k(data.get("k", config.default_k), config)
    return ClassifyRequest(queries, k, check_min_score(data.get("min_score")), check_precision(data.get("precision")))


def parse_classify_query_string(raw: bytes, config: ServeConfig) -> ClassifyRequest:
    """``?q=...&k=...`` of a GET: one query. The raw bytes are decoded strictly, so invalid
    UTF-8 is an error rather than replacement characters."""
    try:
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise HTTPProblem(400, f"the query string is not valid UTF-8 once percent-decoded ({exc.reason})") from None
    fields: dict[str, list[str]] = {}
    for name, value in pairs:
        fields.setdefault(name, []).append(value)
    unknown = sorted(set(fields) - {"q", "k", "min_score", "precision"})
    if unknown:
        raise HTTPProblem(400, f"unknown parameter {unknown[0]!r}; the parameters are q, k, min_score and precision")
    for name, values in fields.items():
        if len(values) > 1:
            raise HTTPProblem(400, f"parameter {name} is given {len(values)} times; GET classifies one query "
                                   f"(POST a JSON batch for more)")
    if "q" not in fields:
        raise HTTPProblem(400, "parameter q is missing: GET /v1/classify?q=QUERY[&k=5]")
    k = config.default_k
    if "k" in fields:
        if not ASCII_DIGITS.fullmatch(fields["k"][0]):  # int() also takes "5_0", " 5" and "٥"
            raise HTTPProblem(400, f"k must be an integer written in the digits 0-9, got {fields['k'][0]!r}")
        k = check_k(int(fields["k"][0]), config)
    numbers = {}
    for name, check, bounds in (("min_score", check_min_score, "in [0, 1]"),
                                ("precision", check_precision, "strictly between 0 and 1")):
        if name in fields:
            if not ASCII_DECIMAL.fullmatch(fields[name][0]):
                raise HTTPProblem(400, f"{name} must be a number {bounds} written in the digits 0-9, "
                                       f"got {fields[name][0]!r}")
            numbers[name] = check(float(fields[name][0]))
    return ClassifyRequest(fields["q"], k, numbers.get("min_score"), numbers.get("precision"))
