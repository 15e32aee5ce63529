"""Fixtures of the judging-app tests: a real PostgreSQL server, migrated stores, toy sessions.

``postgres_server`` runs ``initdb`` into a temporary directory and starts ``postgres`` on a
free localhost port for the whole test session (as the ``postgres`` user, or ``nobody``, when
the tests run as root: PostgreSQL refuses to run as root). Every test that asks for a
PostgreSQL store gets a fresh database on it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

PG_ENV = "QCAT_TEST_PG_BIN"
ROOT = Path(__file__).resolve().parent.parent


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that must import this checkout's code."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def qcat(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    """``qcat ARGS`` in a subprocess, run from the repository root."""
    return subprocess.run([sys.executable, "-m", "qcat.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=child_env())


def postgres_bin() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None."""
    candidates = [os.environ.get(PG_ENV, "")]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(os.path.realpath(found)).parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += ["/usr/local/pgsql/bin", "/opt/homebrew/bin", "/usr/local/bin"]
    for directory in candidates:
        if directory and all((Path(directory) / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(directory)
    return None


DEMO_QUERIES = 6
REVISIONS = ["0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009"]  # the judging store's migrations, oldest first


def add_judges(url, names) -> list[str]:
    """``qcat judge add-judge`` for each name into a migrated store: their sign-in tokens, in order."""
    tokens = []
    for name in names:
        result = qcat("judge", "add-judge", name, "--url", url)
        assert result.returncode == 0, result.stderr
        assert "shown only this once" in result.stderr
        tokens.append(result.stdout.strip())
    return tokens


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory, built_once) -> tuple[Path, list[str]]:
    """A SQLite store prepared by the CLI: migrated, 3 judges, a 6-query demo session. Built once a
    session (``built_once``: about 20 CPU-s of ``qcat`` commands, the demo models answering) and
    copied for each pytest-xdist worker, whose tests share their copy."""
    def build(directory: Path) -> None:
        path = directory / "demo.db"
        assert qcat("db", "upgrade", "--url", path).returncode == 0
        tokens = add_judges(path, ("ann", "bob", "cy"))
        result = qcat("judge", "create-session", "--baseline", ROOT / "demo" / "qcat_demo" / "model", "--target",
                      ROOT / "demo" / "qcat_demo" / "model", "--queries", DEMO_QUERIES, "--name", "demo", "--url",
                      f"sqlite:///{path}")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "1"
        (directory / "tokens.txt").write_text("\n".join(tokens))

    built = built_once("judging-demo-db", build)
    path = tmp_path_factory.mktemp("judging") / "demo.db"
    for file in built.glob("demo.db*"):  # with any -wal or -shm beside it
        shutil.copyfile(file, path.with_name(file.name))
    return path, (built / "tokens.txt").read_text().splitlines()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> tuple[list[str], str | None]:
    if os.geteuid() != 0:
        return [], None
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"], user
    pytest.skip("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


class PostgresServer:
    """A PostgreSQL server of its own: ``initdb`` into a temporary directory, then :meth:`start`
    and :meth:`stop` (``pg_ctl -m fast``) as often as needed, always on the same port."""

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            pytest.skip("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: "
                        "install the 'postgresql' system package (.ci/run does) or set QCAT_TEST_PG_BIN")
        self.bin_dir = bin_dir
        self.prefix, user = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="qcat-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.port = free_port()
        done = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "qcat", "-E", "UTF8",
                         "--no-sync", "--no-instructions")
        assert done.returncode == 0, done.stderr

    @property
    def admin_url(self) -> str:
        """The URL of the server's ``postgres`` database."""
        return f"postgresql+psycopg://qcat@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, str(self.bin_dir / tool), *args], capture_output=True, text=True,
                              timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off " \
                  "-c synchronous_commit=off -c full_page_writes=off -c max_connections=60"
        done = self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "60", "start")
        assert done.returncode == 0, done.stderr + (self.log.read_text() if self.log.exists() else "")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """The admin URL (database ``postgres``) of a PostgreSQL server started for these tests."""
    server = PostgresServer()
    server.start()
    try:
        yield server.admin_url
    finally:
        server.remove()


def fresh_database(admin_url: str) -> tuple[str, callable]:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    dsn = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'create database "{name}"')

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f'drop database if exists "{name}" with (force)')

    return admin_url.rsplit("/", 1)[0] + f"/{name}", drop


@pytest.fixture
def pg_url(postgres_server):
    url, drop = fresh_database(postgres_server)
    yield url
    drop()


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'judging.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """An empty database of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'judging.db'}"
    else:
        url, drop = fresh_database(request.getfixturevalue("postgres_server"))
        yield url
        drop()


@pytest.fixture
def store(db_url):
    """A migrated store of each backend."""
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.migrate import upgrade

    upgrade(db_url)
    opened = open_store(db_url)
    yield opened
    opened.dispose()


def toy_queries(n: int, per_list: int = 5, prefix: str = "query"):
    """``n`` queries over the three segments, each with two overlapping result lists."""
    from qcat.judging.grading.sessions import SEGMENTS, Listing, QuerySpec

    out = []
    for i in range(n):
        baseline = [Listing(f"L{i}-{j}", f"title {i} {j}", "A > B") for j in range(per_list)]
        target = [Listing(f"L{i}-{j + 2}", f"title {i} {j + 2}", "A > C") for j in range(per_list)]
        out.append(QuerySpec(f"{prefix} {i}", SEGMENTS[i % 3], baseline, target, float(n - i)))
    return out


def grade_all(screen, grade) -> dict[tuple[str, str], object]:
    """The same grade for every listing a judge is shown."""
    return {(item.listing_id, side): grade for side, group in (("left", screen.left), ("right", screen.right))
            for item in group}


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not met in time")


def start_judging_app(db: Path, port: int, log_path: Path, session: str = "1",
                      env: dict[str, str] | None = None) -> subprocess.Popen:
    """``qcat judge app`` over the store ``db`` on ``port``, once it answers its health check;
    its output is appended to ``log_path``; ``env``: more environment variables for the app."""
    import urllib.request

    with log_path.open("a") as log:
        process = subprocess.Popen([sys.executable, "-m", "qcat.cli", "judge", "app", "--url", str(db), "--session",
                                    session, "--port", str(port), "--address", "127.0.0.1"],
                                   cwd=ROOT, env=child_env(**(env or {})), stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the app exited: {log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_for(healthy, timeout=40, interval=0.25)
    return process


def stop_judging_app(process: subprocess.Popen) -> None:
    """Stop the app: the wrapper and the Streamlit server it started (its process group)."""
    import signal

    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def running_judging_app(db: Path, log_path: Path, session: str = "1", env: dict[str, str] | None = None):
    """A started app on a free port for the ``with`` block; yields its URL."""
    port = free_port()
    process = start_judging_app(db, port, log_path, session, env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_judging_app(process)


@pytest.fixture
def fresh_sign_in_limits():
    """Each test starts with no wrong tokens counted (the app's limiter lives in this process)."""
    from qcat.judging.store.sign_in_limits import LIMITER

    LIMITER.clear()
    yield
    LIMITER.clear()


def run_threads(target, n: int) -> list:
    """``target(i)`` for i in 0..n-1, each in its own thread, all started together; their results."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def work(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


# ---- the grading panel under streamlit.testing.v1.AppTest: what it was sent, and messages as it sends them
PANEL = "qcat_grading_panel"


def panel_data(at) -> dict | None:
    """The data the app sent the grading panel in this run (None: no panel on the page)."""
    import json

    for node in at.main:
        proto = getattr(node, "proto", None)
        if type(proto).__name__ == "BidiComponent" and proto.component_name == PANEL:
            return json.loads(proto.json)
    return None


def panel_query(at) -> str | None:
    """The query the panel shows (the first it was sent), as the judge reads it."""
    import html

    data = panel_data(at)
    if data is None or data["mode"] not in ("grade", "review") or not data["queue"]:
        return None
    return html.unescape(data["queue"][0]["text"])


def panel_slots(at) -> list[dict]:
    """The listings to grade of the query shown (a listing in both groups once)."""
    data = panel_data(at)
    return data["queue"][0]["slots"] if data and data["queue"] else []


def panel_action(at, kind: str, grades=None, note: str | None = None, seconds: float | None = None) -> dict:
    """An action on the query shown, as the panel builds it; ``grades``: one grade for every
    listing, or a list of one per listing."""
    import html

    data = panel_data(at)
    shown = data["queue"][0]
    action = {"id": uuid.uuid4().hex, "kind": kind, "query": shown["id"], "text": html.unescape(shown["text"]),
              "note": note}
    if grades is not None:
        per_slot = grades if isinstance(grades, list) else [grades] * len(shown["slots"])
        action["grades"] = [[slot["listing"], slot["side"], grade] for slot, grade in zip(shown["slots"], per_slot)]
    if seconds is not None:
        action["seconds"] = seconds
    return action


def panel_send(at, *actions: dict, holding: list[int] | None = None):
    """The panel sends its outbox (``actions``) and the queries it holds (those come back as their
    id alone); the app runs once."""
    import json

    if holding is None:  # as a reloaded panel: it holds nothing, so every query comes whole
        holding = []
    proto_id = next(node.proto.id for node in at.main
                    if type(getattr(node, "proto", None)).__name__ == "BidiComponent")
    tree = at._tree
    states = tree.get_widget_states

    def with_panel():
        widgets = states()
        state = widgets.widgets.add()
        state.id = proto_id
        state.json_value = json.dumps({"outbox": {"actions": list(actions), "holding": holding}})
        return widgets

    tree.get_widget_states = with_panel
    return at.run()


def panel_answers(at) -> list[dict]:
    """The answers the panel was sent in this run, in the order of the actions."""
    data = panel_data(at)
    return list((data or {}).get("answers", {}).values())


# ---- the grading panel in Chromium (Playwright): read its state, type into it
CHROMIUM = os.environ.get("QCAT_CHROMIUM", "/usr/bin/chromium")
SHOWN = """() => { const p = window.qcatPanel, c = p && p.root && p.current;
  return c ? {id: c.id, text: c.plain, slots: c.slots.map(s => [s.listing, s.side])} : null; }"""
SETTLED = "() => window.qcatPanel && window.qcatPanel.outbox.length === 0 && window.qcatPanel.failed.length === 0"


def panel_shown(page, timeout_ms: float = 20_000) -> dict:
    """The query on the panel's screen (waits for one): ``{id, text, slots: [[listing, side]...]}``."""
    page.wait_for_function(SHOWN, timeout=timeout_ms)
    return page.evaluate(SHOWN)


def type_keys(page, keys, interval_s: float = 0.03) -> None:
    """Press each key, one every ``interval_s`` seconds (a judge at speed)."""
    for key in keys:
        page.keyboard.press(str(key))
        time.sleep(interval_s)


def signed_in_panel(browser, url: str, token: str, viewport: dict | None = None):
    """A new browser context and page, signed in with ``token``, once the panel shows a query."""
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(url)
    page.get_by_label("Your judge token").fill(token)
    page.keyboard.press("Enter")
    return context, page


def launch_chromium(p):
    return p.chromium.launch(executable_path=CHROMIUM, headless=True,
                             args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                   "--disable-component-update", "--no-first-run", "--disable-sync"])


def stored_grades(db, judge: str) -> dict[int, dict[tuple[str, str], int]]:
    """Every grade ``judge`` has in the store: query id -> (listing, side) -> grade."""
    from sqlalchemy import select

    from qcat.judging.store.connection import open_store
    from qcat.judging.store.models import Judge, Judgment

    store = open_store(str(db))
    try:
        with store.sessions() as session:
            rows = session.execute(select(Judgment.query_id, Judgment.listing_id, Judgment.side, Judgment.grade)
                                   .join(Judge, Judge.id == Judgment.judge_id).where(Judge.name == judge)).all()
    finally:
        store.dispose()
    graded: dict[int, dict[tuple[str, str], int]] = {}
    for query_id, listing, side, grade in rows:
        graded.setdefault(query_id, {})[(listing, side)] = grade
    return graded


def pytest_collection_finish(session) -> None:
    """The modules that drive the app through ``AppTest`` run it as ``qcat judge app`` runs it,
    with ``runner.postScriptGC`` off (judging_app/commands/app.py: Streamlit's default collects
    every generation after each script run, and in a test worker that has loaded TensorFlow and
    JAX that is seconds a test). And ``AppTest`` scans every installed distribution for Streamlit
    components on each new ``AppTest`` (about 0.5 CPU-s; a running app scans once at its start):
    the distributions do not change during a test run, so they are scanned once a process."""
    if "streamlit.testing.v1" in sys.modules:
        import functools

        from streamlit import config
        from streamlit.components.v2 import manifest_scanner

        config.set_option("runner.postScriptGC", False)
        if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):
            manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
