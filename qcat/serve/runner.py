"""Running the service: bind the socket, then serve in this process (``--workers 1``) or in
pre-forked worker processes that share the socket and the loaded model's memory.

Signals: SIGTERM/SIGINT drain in-flight requests (up to ``--drain`` seconds) and stop; SIGHUP
reloads the bundle in every worker. With several workers the supervisor forwards signals; a
reload requested over HTTP in one worker reaches the others through it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys

from qcat.bundles.bundle import normalizer_mismatch
from qcat.errors import InputError, QcatError
from qcat.serve import loading, memory
from qcat.serve.config import ServeConfig
from qcat.serve.loading import LoadedModel
from qcat.serve.reloads import PreforkedWorker, ReloadBoard

log = logging.getLogger("qcat.serve")
SUPERVISED = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)


def serve(config: ServeConfig) -> int:
    """Load and verify the model, listen, serve until stopped. Errors before serving (a bad
    bundle, a port in use) are ``QcatError``s with one-line messages."""
    _configure_logging()
    memory.keep_large_allocations_returnable()
    loaded = loading.load(config)
    mismatch = normalizer_mismatch(loaded.classifier.manifest)
    if mismatch:
        print(f"qcat serve: warning: {mismatch}", file=sys.stderr, flush=True)
    if config.workers == 1:
        sock = _listen(config)
        _announce(config, loaded, sock.getsockname()[:2])
        startup, loaded = [loaded], None  # the app takes it: once reloaded, nothing here keeps it alive
        _run_worker(config, startup, sock)
        return 0
    return _supervise(config, loaded)


def _announce(config: ServeConfig, loaded: LoadedModel, address: tuple) -> None:
    host, port = address
    print(f"qcat serve: {loaded.classifier.model.backend} model {loaded.bundle_hash[:12]} "
          f"from {loaded.configured}, listening on http://{host}:{port} "
          f"({config.workers} worker{'s' if config.workers > 1 else ''}); Ctrl-C to stop",
          file=sys.stderr, flush=True)


def _configure_logging() -> None:
    service = logging.StreamHandler(sys.stderr)
    service.setFormatter(logging.Formatter("qcat serve [%(process)d]: %(message)s"))
    log.addHandler(service)
    log.setLevel(logging.INFO)


def _listen(config: ServeConfig, port: int | None = None, reuse_port: bool = False) -> socket.socket:
    """A listening socket on ``config``'s address (or on ``port``)."""
    sock = _bound(config, port, reuse_port)
    sock.listen(2048)
    return sock


def _bound(config: ServeConfig, port: int | None, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((config.host, config.port if port is None else port))
    except OSError as exc:
        sock.close()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise InputError(f"cannot listen on {config.host}:{config.port}: {reason} "
                         f"(choose another --port or --host)") from None
    return sock


def _run_worker(config: ServeConfig, startup: list[LoadedModel], sock: socket.socket, reloads=None) -> None:
    """Serve on ``sock``. ``startup`` holds the model to start with; the worker takes it out, so
    that after a reload no frame keeps the startup bundle's memory."""
    import uvicorn

    from qcat.serve.app import create_app
    from qcat.serve.http_layer import DrainingServer, Lifecycle, guarded_protocol

    lifecycle = Lifecycle()
    app = create_app(config, startup.pop(), reloads, lifecycle)
    server = DrainingServer(lifecycle, uvicorn.Config(
        app, loop="uvloop", http=guarded_protocol(config.timeout_s, config.max_connections, lifecycle),
        lifespan="on", access_log=False, log_level="warning", timeout_keep_alive=config.keep_alive_s,
        timeout_graceful_shutdown=config.drain_s, server_header=False))
    server.run(sockets=[sock])


def _supervise(config: ServeConfig, loaded: LoadedModel) -> int:
    """Fork the workers. Each listens on a socket of its own (SO_REUSEPORT), so the kernel
    spreads new connections over them; with one shared socket, whichever worker wakes first
    accepts a whole burst. The supervisor holds the port with a bound socket that never
    listens (so it receives no connections), and announces once every worker listens."""
    placeholder = _bound(config, None, reuse_port=True)
    port = placeholder.getsockname()[1]
    signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISED)
    children: dict[int, int] = {}  # pid -> its slot on the reload board
    parent = os.getpid()
    board = ReloadBoard(config.workers)
    ready_read, ready_write = os.pipe()

    def spawn(model: LoadedModel, slot: int, at_start: bool, generation: int) -> None:
        pid = os.fork()
        if pid == 0:
            # SIGHUP stays blocked until the app handles it (a reload asked for meanwhile waits,
            # instead of ending the worker by SIGHUP's default action).
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(SUPERVISED) - {signal.SIGHUP})
            code = 0
            try:
                placeholder.close()
                sock = _listen(config, port, reuse_port=True)
                if at_start:
                    os.close(ready_read)
                    os.write(ready_write, b".")
                    os.close(ready_write)
                startup, model = [model], None
                _run_worker(config, startup, sock, PreforkedWorker(board, slot, parent, generation))
            except BaseException:
                log.exception("worker failed")
                code = 1
            finally:
                os._exit(code)
        children[pid] = slot

    for slot in range(config.workers):
        spawn(loaded, slot, at_start=True, generation=0)
    os.close(ready_write)
    listening = b""
    while len(listening) < config.workers:
        chunk = os.read(ready_read, config.workers)
        if not chunk:  # a worker failed before listening (it logged why): stop the others
            for pid in children:
                os.kill(pid, signal.SIGTERM)
            raise QcatError(f"qcat serve: {config.workers - len(listening)} worker(s) could not start")
        listening += chunk
    os.close(ready_read)
    _announce(config, loaded, (config.host, port))
    stopping = False
    while children:
        info = signal.sigwaitinfo(SUPERVISED)
        if info.si_signo == signal.SIGHUP:
            for pid in set(children) - {info.si_pid}:  # a worker that reloaded over HTTP has done so already
                os.kill(pid, signal.SIGHUP)
        elif info.si_signo in (signal.SIGTERM, signal.SIGINT):
            stopping = True
            for pid in children:
                os.kill(pid, signal.SIGTERM)
        else:
            for pid, slot in _reap(children):
                board.clear(slot)
                if not stopping:
                    log.warning("worker %d exited; starting another", pid)
                    generation = board.asked()  # what the bundle loaded now is at least as new as
                    spawn(_fresh_or(loaded, config), slot, at_start=False, generation=generation)
    return 0


def _reap(children: dict[int, int]) -> list[tuple[int, int]]:
    """(pid, slot) of each worker that has ended."""
    ended = []
    while children:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        ended.append((pid, children.pop(pid)))
    return ended


def _fresh_or(startup: LoadedModel, config: ServeConfig) -> LoadedModel:
    """A replacement worker serves the bundle as it is now (it may have been reloaded)."""
    try:
        return loading.load(config)
    except QcatError as exc:
        log.warning("the replacement worker serves the startup model: the bundle does not load now: %s", exc)
        return startup
