"""The OpenAPI 3.1 description of the API, served at ``/openapi.json`` (a test checks that it
validates and lists exactly the app's routes)."""

from __future__ import annotations

from qcat.serve.config import RELOAD_TOKEN_ENV, ServeConfig
from qcat.version import __version__


def _json(schema_ref: str, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


def openapi_document(config: ServeConfig) -> dict:
    error = _json("Error", "the problem, in one line")
    classified = _json("ClassifyResponse", "one result per query, in order")
    k = {"type": "integer", "minimum": 1, "maximum": config.max_k, "default": config.default_k,
         "description": "categories per query"}
    min_score = {"type": "number", "minimum": 0, "maximum": 1,
                 "description": "only categories scoring at least this (a calibrated probability where the "
                                "result says calibrated); a query may then get none. Default: the top k."}
    precision = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                 "description": "also answer `node`: the deepest taxonomy node (department, aisle, ... or leaf) "
                                "the query's category lies beneath, right at least this share of the time on data "
                                "the bundle's node calibration never saw; null when even a department is not "
                                "(`node_why` says why). 400 for a bundle without a node calibration."}
    return {
        "openapi": "3.1.0",
        "info": {"title": "qcat query categorization", "version": __version__,
                 "description": "Categorize e-commerce search queries into the leaf categories of a taxonomy. "
                                "Results are the objects of `qcat classify --json`. Every response carries "
                                "`X-Request-ID`: the request's own (letters, digits, `._:/+=-`, at most 128) or "
                                "a new one; the access log records it. Every error is JSON, `{\"error\": ...}`, "
                                "including 400 for a request the HTTP parser cannot read, 408 for headers that "
                                "do not arrive within --timeout and 503 past --max-connections."},
        "paths": {
            "/v1/classify": {
                "get": {
                    "summary": "Classify one query",
                    "description": "The same answer as a POST of one query: a query that cannot be classified "
                                   "(empty after normalization, longer than "
                                   f"{config.max_query_length} characters) gets an error object as its result.",
                    "parameters": [
                        {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}},
                        {"name": "k", "in": "query", "required": False, "schema": k},
                        {"name": "min_score", "in": "query", "required": False, "schema": min_score},
                        {"name": "precision", "in": "query", "required": False, "schema": precision},
                    ],
                    "responses": {"200": classified, "400": error, "408": error, "503": error},
                },
                "post": {
                    "summary": "Classify a batch of queries",
                    "description": "A query that cannot be classified (empty after normalization, longer than "
                                   f"{config.max_query_length} characters) gets an error object in its place; "
                                   "the rest of the batch is answered.",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {
                        "$ref": "#/components/schemas/ClassifyRequest"}}}},
                    "responses": {"200": classified, "400": error, "408": error, "413": error, "503": error},
                },
            },
            "/v1/model": {"get": {"summary": "The bundle being served",
                                  "responses": {"200": _json("ModelSummary", "manifest summary")}}},
            "/v1/reload": {"post": {
                "summary": "Load the model directory again, verify it and swap it in",
                "description": f"Needs `Authorization: Bearer <token>` with the token the service was started "
                               f"with in {RELOAD_TOKEN_ENV}. A bundle that fails verification is refused and "
                               "the old one keeps serving. With several workers, the answer comes once every "
                               "worker has reloaded: a 200 means all of them serve the new bundle.",
                "security": [{"reloadToken": []}],
                "responses": {"200": {"description": "reloaded: every worker now serves the new bundle",
                                      "content": {"application/json": {"schema": {
                    "type": "object", "required": ["reloaded", "previous_bundle_hash", "model", "workers"],
                    "properties": {"reloaded": {"const": True}, "previous_bundle_hash": {"type": "string"},
                                   "model": {"$ref": "#/components/schemas/ModelSummary"},
                                   "workers": {"type": "array", "items": {"$ref": "#/components/schemas/Worker"}}}}}}},
                              "401": error, "403": error, "422": error,
                              "500": {"description": "this worker reloaded, but some other worker serves another "
                                                     "bundle (or did not reload in time): reload again",
                                      "content": {"application/json": {"schema": {
                                          "type": "object", "required": ["error", "workers"], "properties": {
                                              "error": {"type": "string"}, "workers": {"type": "array", "items": {
                                                  "$ref": "#/components/schemas/Worker"}}}}}}}},
            }},
            "/healthz": {"get": {"summary": "Liveness", "responses": {"200": _json("Status", "alive")}}},
            "/readyz": {"get": {"summary": "Readiness: a verified model is loaded",
                                "responses": {"200": _json("Status", "ready"),
                                              "503": _json("Status", "draining: the process is shutting down")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {
                "description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": {
                "description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        },
        "components": {
            "securitySchemes": {"reloadToken": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "ClassifyRequest": {
                    "type": "object", "required": ["queries"], "additionalProperties": False,
                    "properties": {"queries": {"type": "array", "minItems": 1, "maxItems": config.max_batch,
                                               "items": {"type": "string"}}, "k": k,
                                   "min_score": {**min_score, "type": ["number", "null"],
                                                 "description": min_score["description"] + " null: the same."},
                                   "precision": {**precision, "type": ["number", "null"],
                                                 "description": precision["description"] + " null: no node."}}},
                "Node": {"type": "object", "required": ["id", "path", "depth", "probability", "leaf"], "properties": {
                    "id": {"type": "string"}, "path": {"type": "string", "description": "A > B"},
                    "depth": {"type": "integer", "minimum": 1, "description": "a department is 1"},
                    "probability": {"type": "number", "description": "the calibrated probability that the query's "
                                                                     "category lies beneath the node"},
                    "leaf": {"type": "boolean", "description": "whether the node is a leaf category"}}},
                "Category": {"type": "object", "required": ["id", "path", "score"], "properties": {
                    "id": {"type": "string"}, "path": {"type": "string", "description": "A > B > C"},
                    "score": {"type": "number", "description": "the probability that the category is right where "
                                                               "the result says calibrated, else the model's raw score"}}},
                "Result": {"oneOf": [
                    {"type": "object", "required": ["query", "normalized", "backend", "source", "calibrated", "categories"],
                     "properties": {
                        "query": {"type": "string"}, "normalized": {"type": "string"}, "backend": {"type": "string"},
                        "source": {"type": "string", "description": "the part of the model that answered (nb, "
                                   "lookup, xreg, blend...), or judged: the bundle's judged override for the "
                                   "normalized query, its categories first at score 1.0"},
                        "calibrated": {"type": "boolean", "description": "whether the scores are calibrated "
                                                                         "probabilities (else raw scores)"},
                        "categories": {"type": "array", "items": {"$ref": "#/components/schemas/Category"}},
                        "precision": {"type": "number", "description": "present when asked: the precision of `node`"},
                        "node": {"oneOf": [{"$ref": "#/components/schemas/Node"}, {"type": "null"}],
                                 "description": "present when `precision` was asked"},
                        "node_why": {"type": "string", "description": "present when `node` is null: why"}}},
                    {"type": "object", "required": ["query", "error"], "properties": {
                        "query": {"type": "string"}, "error": {"type": "string"}}},
                ]},
                "ModelIdentity": {"type": "object", "required": ["backend", "bundle_hash"], "properties": {
                    "backend": {"type": "string"}, "bundle_hash": {"type": "string", "description": "sha256 of manifest.json"}}},
                "ClassifyResponse": {"type": "object", "required": ["model", "results"], "properties": {
                    "model": {"$ref": "#/components/schemas/ModelIdentity"},
                    "results": {"type": "array", "items": {"$ref": "#/components/schemas/Result"}}}},
                "ModelSummary": {"type": "object", "required": ["backend", "bundle_hash", "taxonomy_hash", "loaded_at", "served_by"],
                                 "properties": {"backend": {"type": "string"}, "bundle_hash": {"type": "string"},
                                                "taxonomy_hash": {"type": "string"}, "loaded_at": {"type": "string"},
                                                "load_seconds": {"type": "number"}, "labels": {"type": "integer"},
                                                "directory": {"type": "string"},
                                                "qcat_version": {"type": "string", "description": "the qcat that built the bundle"},
                                                "served_by": {"type": "string", "description": "the qcat serving it"},
                                                "overrides": {"type": "integer", "description": "present when the "
                                                              "bundle's judged overrides are served: how many queries"},
                                                "second_stage": {"type": "object", "description": "present when a "
                                                                 "learned re-ranker (qcat train rerank) orders the "
                                                                 "first stage's candidates"}}},
                "Status": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
                "Worker": {"type": "object", "required": ["pid", "bundle_hash", "last_reload"], "properties": {
                    "pid": {"type": "integer"}, "bundle_hash": {"type": "string"},
                    "last_reload": {"enum": ["ok", "refused"]}}},
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            },
        },
    }
