"""The HTTP API: routes, JSON errors, the access log and request metrics.

Routes: ``GET|POST /v1/classify``, ``GET /v1/model``, ``POST /v1/reload``, ``GET /healthz``,
``GET /readyz``, ``GET /metrics``, ``GET /openapi.json``. Every error is JSON,
``{"error": "..."}``, with a 4xx/5xx status; nothing a client sends reaches it as a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import signal
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime, timezone

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from qcat.errors import QcatError
from qcat.models.calibration.nodes import no_node_calibration
from qcat.serve import loading, memory
from qcat.serve.access_log import AccessLog
from qcat.serve.batching import DeadlineExceeded, DirectRunner, MicroBatcher
from qcat.serve.config import RELOAD_TOKEN_ENV, ServeConfig
from qcat.serve.http_layer import Lifecycle
from qcat.serve.loading import LoadedModel
from qcat.serve.metrics import CONTENT_TYPE, ServiceMetrics
from qcat.serve.openapi import openapi_document
from qcat.serve.reloads import SingleWorker
from qcat.serve.requests import HTTPProblem, parse_classify_body, parse_classify_query_string

log = logging.getLogger("qcat.serve")
JSON = "application/json"


def json_response(data, status: int = 200, headers: dict | None = None) -> Response:
    # A lone surrogate (a query sent as "\ud800") is written back as its JSON escape.
    body = json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return Response(body, status, headers, media_type=JSON)


def error_response(status: int, message: str, headers: dict | None = None) -> Response:
    return json_response({"error": message}, status, headers)


class ModelSlot:
    """The model being served. ``reload`` loads a new bundle next to the running one (off the
    event loop) and swaps the reference: requests already running keep the model they took;
    the old bundle's memory is given back once the last of them ends."""

    def __init__(self, config: ServeConfig, loaded: LoadedModel, metrics: ServiceMetrics, reloads) -> None:
        self.config = config
        self.current = loaded
        self.metrics = metrics
        self.reloads = reloads
        self.lock = asyncio.Lock()
        # One loading thread: each thread that allocates gets its own malloc arena, and a bundle
        # loaded by a different thread each time would leave a fragmented heap in every arena.
        self.loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qcat-reload")
        metrics.serving(loaded.identity)
        reloads.record(reloads.startup_generation, False, loaded.bundle_hash)

    async def reload(self, generation: int) -> tuple[str, LoadedModel]:
        """(the old bundle's hash, the new model), recorded as ``generation`` of the reloads;
        raises QcatError (the old model keeps serving) if the bundle is refused."""
        async with self.lock:
            try:
                new = await asyncio.get_running_loop().run_in_executor(self.loader, loading.load, self.config)
            except QcatError as exc:
                self.reloads.record(generation, True, self.current.bundle_hash)
                self.metrics.reloads.labels("refused").inc()
                log.warning("reload refused, still serving %s: %s", self.current.bundle_hash[:12], exc)
                raise
            old, self.current = self.current, new
            self.reloads.record(generation, False, new.bundle_hash)
            self.metrics.reloads.labels("ok").inc()
            self.metrics.serving(new.identity, old.identity)
            log.warning("reloaded: now serving %s (was %s), loaded in %.2f s",
                        new.bundle_hash[:12], old.bundle_hash[:12], new.load_seconds)
            weakref.finalize(old, memory.give_back)  # once the last request using it has ended
            return old.bundle_hash, new


REQUEST_ID = re.compile(rb"[A-Za-z0-9._:/+=-]{1,128}")


def request_id_of(headers: list[tuple[bytes, bytes]]) -> bytes:
    """The client's ``X-Request-ID`` if it is a plain token (letters, digits, ``._:/+=-``, at
    most 128), else a new one: it is echoed in the response and the access log, so nothing
    else (no newline, no quote) may pass."""
    for name, value in headers:
        if name == b"x-request-id" and REQUEST_ID.fullmatch(value):
            return value
    return uuid.uuid4().hex.encode("ascii")


ROUTES = ("/v1/classify", "/v1/model", "/v1/reload", "/healthz", "/readyz", "/metrics", "/openapi.json")


class ObservedApp:
    """ASGI wrapper: request metrics and one JSON access-log line per request."""

    def __init__(self, app, metrics: ServiceMetrics, access_log: AccessLog | None) -> None:
        self.app = app
        self.metrics = metrics
        self.access_log = access_log
        self._requests = {}  # (route, method, status) -> its counter: labels() costs more than inc()
        self._latency = {route: metrics.latency.labels(route) for route in ROUTES + ("other",)}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = [500]
        request_id = request_id_of(scope["headers"])

        async def observed_send(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = message | {"headers": list(message.get("headers", [])) + [(b"x-request-id", request_id)]}
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            elapsed = time.perf_counter() - started
            route = scope["path"] if scope["path"] in ROUTES else "other"
            key = (route, scope["method"], status[0])
            counter = self._requests.get(key)
            if counter is None:
                counter = self._requests[key] = self.metrics.requests.labels(route, scope["method"], str(status[0]))
            counter.inc()
            self._latency[route].observe(elapsed)
            if self.access_log is not None:
                client = scope.get("client")
                self.access_log.write({
                    "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                    "pid": os.getpid(), "request_id": request_id.decode("ascii"),
                    "method": scope["method"], "path": scope["path"],
                    "status": status[0], "ms": round(elapsed * 1000, 3),
                    "queries": scope.get("state", {}).get("queries"),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                })


def create_app(config: ServeConfig, loaded: LoadedModel, reloads=None, lifecycle: Lifecycle | None = None) -> ObservedApp:
    """The ASGI application serving ``loaded``. ``reloads`` (:mod:`qcat.serve.reloads`) tells a
    reload how to reach the other workers, if any; ``lifecycle`` says when the process drains."""
    reloads = reloads if reloads is not None else SingleWorker()
    lifecycle = lifecycle if lifecycle is not None else Lifecycle()
    metrics = ServiceMetrics()
    slot = ModelSlot(config, loaded, metrics, reloads)
    runner = (MicroBatcher(metrics, config.max_query_length, config.max_batch) if config.micro_batch
              else DirectRunner(metrics, config.max_query_length))

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise HTTPProblem(413, f"request body of {int(declared):,} bytes is larger than the limit of "
                                   f"{config.max_body_bytes:,}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_body_bytes:
                raise HTTPProblem(413, f"request body is larger than the limit of {config.max_body_bytes:,} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def classify(request: Request) -> Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.timeout_s
        try:
            if request.method == "GET":
                parsed = parse_classify_query_string(request.scope["query_string"], config)
            else:
                try:
                    body = await asyncio.wait_for(read_body(request), config.timeout_s)
                except asyncio.TimeoutError:
                    raise HTTPProblem(408, f"the request body did not arrive within {config.timeout_s:g} s") from None
                parsed = parse_classify_body(body, config)
        except HTTPProblem as problem:
            return error_response(problem.status, problem.message)
        request.state.queries = len(parsed.queries)
        loaded = slot.current  # this request's model, whatever a reload does meanwhile
        if parsed.precision is not None and loaded.classifier.nodes is None:
            return error_response(400, no_node_calibration(loaded.configured))
        try:
            answers = await runner.classify(loaded, parsed.queries, parsed.k, parsed.min_score, deadline, parsed.precision)
        except DeadlineExceeded:
            return error_response(503, f"the service is overloaded: the request waited more than "
                                       f"{config.timeout_s:g} s for the model", {"Retry-After": "1"})
        results = [answer.to_json() for answer in answers]
        failed = sum("error" in result for result in results)
        metrics.queries.inc(len(results) - failed)
        if failed:
            metrics.query_errors.inc(failed)
        # A query that cannot be classified is an error object in its result, for GET as for POST: any
        # string is a valid `q` by the schema, so the request itself is answered (200).
        return json_response({"model": loaded.identity, "results": results})

    async def model(request: Request) -> Response:
        return json_response(slot.current.summary())

    async def reload(request: Request) -> Response:
        # No credentials: 401, whether or not reloading is on (the schema's bearer security says so).
        # Credentials while reloading over HTTP is off: 403. Wrong credentials: 401.
        given = request.headers.get("authorization")
        if given is None:
            return error_response(401, "reload needs the header 'Authorization: Bearer <token>' with the "
                                       f"token in {RELOAD_TOKEN_ENV}", {"WWW-Authenticate": "Bearer"})
        expected = os.environ.get(RELOAD_TOKEN_ENV, "")
        if not expected:
            return error_response(403, f"reloading over HTTP is off: start the service with {RELOAD_TOKEN_ENV} "
                                       f"set to a secret (or send the process SIGHUP)")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), f"Bearer {expected}".encode("utf-8")):
            return error_response(401, "reload needs the header 'Authorization: Bearer <token>' with the "
                                       f"token in {RELOAD_TOKEN_ENV}", {"WWW-Authenticate": "Bearer"})
        try:
            previous_hash, new = await slot.reload(reloads.ask())
        except QcatError as exc:
            return error_response(422, f"bundle refused, still serving {slot.current.bundle_hash}: {exc}")
        states, in_time = await reloads.everywhere(reloads.asked())
        workers = [state.to_json() for state in states]
        behind = [state for state in states if state.refused or state.bundle_hash != new.bundle_hash]
        if behind or not in_time:
            late = "" if in_time else " (not every worker reloaded in time)"
            return json_response({"error": f"this worker serves {new.bundle_hash}, but {len(behind)} of "
                                           f"{len(states)} workers serve another bundle{late}: reload again",
                                  "workers": workers}, 500)
        return json_response({"reloaded": True, "previous_bundle_hash": previous_hash, "model": new.summary(),
                              "workers": workers})

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(request: Request) -> Response:
        if lifecycle.draining:
            return json_response({"status": "draining", **slot.current.identity}, 503)
        return json_response({"status": "ready", **slot.current.identity})

    async def prometheus(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def openapi(request: Request) -> Response:
        return json_response(openapi_document(config))

    async def http_error(request: Request, exc: HTTPException) -> Response:
        message = {404: f"no route {request.url.path}; see /openapi.json",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, exc.detail)
        return error_response(exc.status_code, message, getattr(exc, "headers", None))

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error: {type(exc).__name__} (details are in the service's log)")

    def reload_on_sighup() -> None:
        async def run():
            try:
                await slot.reload(reloads.asked())
            except QcatError:
                pass  # logged by ModelSlot.reload; the old model keeps serving
        asyncio.get_running_loop().create_task(run())

    @asynccontextmanager
    async def lifespan(app):
        await runner.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, reload_on_sighup)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})  # a pre-forked worker starts with it blocked
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGHUP)
            await runner.stop()
            slot.loader.shutdown(wait=False)

    app = Starlette(
        routes=[
            Route("/v1/classify", classify, methods=["GET", "POST"]),
            Route("/v1/model", model, methods=["GET"]),
            Route("/v1/reload", reload, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", prometheus, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # /v1/classify/ is a 404 with a JSON error, not a 307
    return ObservedApp(app, metrics, AccessLog() if config.access_log else None)
