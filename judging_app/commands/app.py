"""``qcat judge app``: the Streamlit judging app, run as a child that dies with this process and
stops on SIGTERM, SIGINT or SIGHUP."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from qcat.judging.commands.common import display_url, existing_session, say
from qcat.judging.store.connection import URL_ENV, resolve_url


def app_command(url: str, session: str | None, port: int, address: str,
                claim_timeout: float = 30) -> tuple[list[str], dict]:
    """The ``streamlit run`` command line and environment of the judging app."""
    from qcat.judging.grading.assignment import CLAIM_TIMEOUT_ENV

    env = {**os.environ, URL_ENV: url, CLAIM_TIMEOUT_ENV: str(claim_timeout)}
    if session is not None:
        env["QCAT_JUDGE_SESSION"] = str(session)
    else:
        env.pop("QCAT_JUDGE_SESSION", None)
    # runner.postScriptGC off: Streamlit's default runs a full gc.collect(2) over the whole server's
    # heap after every script run, and each panel message is one (a fragment rerun): half the app's
    # CPU per graded query (docs/benchmarks/judging.md, issue 55). Python's own collector still runs.
    command = [sys.executable, "-m", "streamlit", "run", str(Path(__file__).resolve().parent.parent / "pages" / "app.py"),
               "--server.port", str(port), "--server.address", address, "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
               "--client.toolbarMode", "viewer", "--runner.postScriptGC", "false"]
    return command, env


def run_app(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.sign_in_limits import PROXY_HEADER_ENV
    from qcat.judging.store.sign_ins import LIFETIME_ENV

    url = resolve_url(args.url)
    store = open_store(url)
    if args.session is not None:
        existing_session(store, args.session)
    store.dispose()
    command, env = app_command(url, args.session, args.port, args.address, args.claim_timeout)
    env[LIFETIME_ENV] = str(args.sign_in_hours)
    if args.trusted_proxy:
        env[PROXY_HEADER_ENV] = args.trusted_proxy
    else:
        env.pop(PROXY_HEADER_ENV, None)
    say(f"judging app on http://{args.address}:{args.port} ({display_url(url)}; claims released after "
        f"{args.claim_timeout:g} idle minutes); Ctrl-C stops it")
    return run_child(command, env)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_GRACE_SECONDS = 10


# Run before the Streamlit server replaces it (exec): on Linux, SIGKILL it when its parent, `qcat
# judge app`, dies (PR_SET_PDEATHSIG survives the exec), and exit at once if the parent is gone
# already. A launcher rather than Popen's preexec_fn, which is unsafe in a process with threads.
DIE_WITH_PARENT = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0); "
                   "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execv(sys.argv[2], sys.argv[2:])")


def run_child(command: list[str], env: dict) -> int:
    """Run the Streamlit server as a child and stop it with this process: SIGTERM, SIGINT or SIGHUP
    sent to this process alone (not only Ctrl-C to the whole group) is passed on to the child, which
    gets :data:`STOP_GRACE_SECONDS` to exit before it is killed; on Linux the child is also killed
    when this process dies without a word (SIGKILL, a crash), so it never serves on alone. Returns
    the child's exit status (0 when it was stopped by one of those signals)."""
    if sys.platform == "linux":
        command = [sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *command]
    child = subprocess.Popen(command, env=env)
    stopping: list[int] = []

    def stop(signum, frame) -> None:
        stopping.append(signum)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    deadline = None
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping and deadline is None:
                    deadline = time.monotonic() + STOP_GRACE_SECONDS
                if deadline is not None and time.monotonic() > deadline:
                    child.kill()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            child.kill()
            child.wait()
    if stopping:
        say(f"judging app stopped ({signal.Signals(stopping[0]).name})")
        return 0
    return code
