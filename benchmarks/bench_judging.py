"""Judging at typing speed: N judges grade through a real `qcat judge app`, in Chromium or by its protocol.

Run: python benchmarks/bench_judging.py [--judges 1 3] [--queries 30] [--key-ms 30]
     [--stores sqlite postgresql]                                (figures in docs/benchmarks/judging.md)
     python benchmarks/bench_judging.py --driver protocol --judges 5 10 30 --pace 20 --minutes 2
         [--admin-every 5] [--apps 2 --proxy --kill-after 30]

For each store and judge count: a fresh store (`qcat db upgrade`), the judges (`qcat judge
add-judge`), a session built from two generated result files (`qcat judge create-session
--results a.jsonl --results b.jsonl --judges-per-query 1`, so that every judge has queries of their
own), and `qcat judge app` on a free port.

--driver chromium (the default): each judge, in a Chromium of their own (Debian's, driven by
Playwright in a thread of their own), signs in and grades --queries queries: the moment a query
is shown, its grades are typed one key every --key-ms milliseconds, then Enter. Nothing waits for
the server between keys or queries, as a judge at full speed would not.

--driver protocol: no browser; each judge speaks the panel's own protocol, Streamlit's WebSocket
(benchmarks/judging_protocol.py, the panel's logic in judging_panel.py), so that ten or thirty
judges cost the machine little and the server can be measured. Each grades for --minutes at
--pace queries a minute: reads the query on screen, types its grades --key-ms apart, Enter.
--admin-every S adds an organizer who reloads the admin page every S seconds (timed, and its
tables checked against a recount of the store at the end). --apps N runs N app processes on the
store (judges spread over them), --proxy puts the nginx block of docs/guide/judging-team.md in
front of them (judges then go through it), --kill-after S kills the app with the most connections
S seconds into the window (its judges' pages connect again, through the proxy to another app).

Printed per judge count: Enter -> next query ready (median and p90 over every transition: in
Chromium from the Enter keydown to the next query drawn; by protocol from the Enter to the next
query held, 0 when one was held ready), queries per minute per judge, how often a judge's Enter
found no query held ready and the panel showed "Loading the next query…" (``loading_shown``, all
judges together), and keys typed vs grades stored as typed (read back from the store, listing by
listing). The protocol driver adds the app's CPU seconds over the grading window per graded query
(/proc/PID/stat of `qcat judge app` and its Streamlit server, utime + stime), its peak memory
(VmHWM) and the driver's own CPU seconds (getrusage), and on PostgreSQL that server's CPU per graded
query. It ends with one JSON line per store and judge count. PostgreSQL runs on a
temporary server of its own (initdb; skipped with a note when the server binaries are missing).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import judging_load  # beside this file: the protocol judges' runs (--driver protocol)
import judging_proxy
from judging_figures import admin_figures, protocol_figures, tally

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("QCAT_CHROMIUM", "/usr/bin/chromium")
SHOWN = """() => { const p = window.qcatPanel, c = p && p.root && p.current;
  return c ? {id: c.id, slots: c.slots.map(s => [s.listing, s.side])} : null; }"""
SETTLED = "() => window.qcatPanel && window.qcatPanel.outbox.length === 0 && window.qcatPanel.failed.length === 0"


def qcat(*args: object) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "qcat.cli", *map(str, args)], capture_output=True, text=True,
                            cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"qcat {' '.join(map(str, args))} failed: {result.stderr}")
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_results(folder: Path, queries: int) -> list[Path]:
    """Two systems' top 5 for ``queries`` queries: two listings in common, three of their own."""
    paths = [folder / "today.jsonl", folder / "candidate.jsonl"]
    for system, path in enumerate(paths):
        with path.open("w") as out:
            for q in range(queries):
                listings = [f"S{q}-{i}" for i in range(2)] + [f"{'AB'[system]}{q}-{i}" for i in range(3)]
                for rank, listing in enumerate(listings, start=1):
                    out.write(json.dumps({"query": f"bench query {q}", "rank": rank, "listing_id": listing,
                                          "title": f"Listing {listing}", "category": "Bench > Things",
                                          "brand": "Acme", "price": 9.5 + rank,
                                          "segment": ("head", "torso", "tail")[q % 3]}) + "\n")
    return paths


class OwnPostgres:
    """A temporary PostgreSQL server (initdb into a temporary folder, as the test suite does)."""

    def __init__(self) -> None:
        found = shutil.which("initdb") or next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))), None)
        if found is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb)")
        self.bin = Path(found).resolve().parent
        self.prefix: list[str] = []
        self.root = Path(tempfile.mkdtemp(prefix="qcat-bench-pg-"))
        if os.geteuid() == 0:  # the server refuses to run as root
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self._run("initdb", "-D", str(self.root / "data"), "-A", "trust", "-U", "qcat", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.prefix, str(self.bin / tool), *args], check=True, capture_output=True, timeout=120)

    def database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"postgresql://qcat@127.0.0.1:{self.port}/postgres", autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://qcat@127.0.0.1:{self.port}/{name}"

    def postmaster(self) -> int:
        return int((self.root / "data" / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_app(url: str, port: int, log: Path, proxied: bool = False) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "qcat.cli", "judge", "app", "--url", url, "--session", "1",
                                "--port", str(port), "--address", "127.0.0.1",
                                *(["--trusted-proxy", "X-Forwarded-For"] if proxied else [])],
                               cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.25)
    raise SystemExit(f"the app did not start: {log.read_text()}")


def connections(port: int) -> int:
    """Established TCP connections to ``port`` on this machine (/proc/net/tcp and tcp6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            count += state == "01" and int(local.rsplit(":", 1)[1], 16) == port
    return count


def judge(url: str, token: str, queries: int, key_s: float, seed: int, out: dict) -> None:
    """One judge at full speed in a Chromium of their own; what they typed, per query and listing."""
    from playwright.sync_api import sync_playwright

    typed: dict[int, dict[tuple[str, str], int]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--no-first-run", "--disable-sync"])
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            page.set_default_timeout(60_000)
            page.goto(url)
            page.get_by_label("Your judge token").fill(token)
            page.keyboard.press("Enter")
            page.wait_for_function(SHOWN)
            started = time.perf_counter()
            for q in range(queries):
                page.wait_for_function(SHOWN)
                shown = page.evaluate(SHOWN)
                digits = [(seed + q + i * (1 + q % 3)) % 4 for i in range(len(shown["slots"]))]
                typed[shown["id"]] = {tuple(slot): d for slot, d in zip(shown["slots"], digits)}
                for key in [*map(str, digits), "Enter"]:
                    page.keyboard.press(key)
                    time.sleep(key_s)
            finished = time.perf_counter()
            page.wait_for_function(SETTLED)
            out.update(typed=typed, seconds=finished - started,
                       transitions=page.evaluate("() => window.qcatPanel.transitions.map(t => t.ms / 1000)"),
                       loading_shown=page.evaluate("() => window.qcatPanel.loadingShown"))
        finally:
            browser.close()


def prepare(url: str, judges: int, queries: int, folder: Path, judges_per_query: int = 1, gold: int = 0) -> list[str]:
    """A migrated store, ``judges`` judges (their tokens), an admin (the last token) and a session
    of ``queries`` queries for each judge, and what each panel holds at the end, each judged by
    ``judges_per_query`` judges; its first ``gold`` queries made gold questions (known grades)."""
    qcat("db", "upgrade", "--url", url)
    tokens = [qcat("judge", "add-judge", f"judge{i}", "--url", url).stdout.strip() for i in range(judges)]
    tokens.append(qcat("judge", "add-admin", "organizer", "--url", url).stdout.strip())
    from qcat.judging.grading.desk import MAX_HOLD

    today, candidate = write_results(folder, judges * (queries + MAX_HOLD))
    qcat("judge", "create-session", "--results", today, "--results", candidate, "--judges-per-query", judges_per_query,
         "--name", "bench", "--url", url)
    if gold:
        known = folder / "gold.csv"
        known.write_text("query,listing_id,grade\n" + "".join(
            f"bench query {q},{listing},{(q + i) % 4}\n" for q in range(gold) for i, listing in enumerate(
                [f"S{q}-{i}" for i in range(2)] + [f"{side}{q}-{i}" for side in "AB" for i in range(3)])))
        qcat("judge", "add-gold", "--session", "bench", "--file", known, "--url", url)
    return tokens


def chromium_judges(port: int, tokens: list[str], queries: int, key_s: float) -> list[dict]:
    results: list[dict] = [{} for _ in tokens]
    threads = [threading.Thread(target=judge, args=(f"http://127.0.0.1:{port}", token, queries, key_s, i,
                                                    results[i])) for i, token in enumerate(tokens)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def run(store_kind: str, url: str, judges: int, queries: int, key_s: float, folder: Path,
        protocol: dict | None = None, postmaster: int | None = None) -> dict:
    """One store and judge count: Chromium judges (``protocol`` None) or protocol judges
    (``protocol``: ``pace`` and ``minutes``, :mod:`judging_load`; optionally ``apps``, the number
    of app processes, ``proxy``, the guide's nginx in front of them, ``admin_every``, an organizer
    reloading the admin page every so many seconds, ``kill_after``, seconds after which the app
    with the most connections is killed, and ``settle_s``, how long the judges wait for the answers
    to their last actions)."""
    protocol = protocol or {}
    if protocol:
        queries = math.ceil(protocol["pace"] * protocol["minutes"]) + 2
    *tokens, admin_token = prepare(url, judges, queries, folder, protocol.get("judges_per_query", 1),
                                   protocol.get("gold", 0))
    ports = [free_port() for _ in range(protocol.get("apps", 1))]
    apps = [start_app(url, port, folder / f"app-{store_kind}-{judges}-{i}.log", protocol.get("proxy", False))
            for i, port in enumerate(ports)]
    proxy = None
    load_before = os.getloadavg()[0]
    usage = {}
    try:
        if not protocol:
            results = chromium_judges(ports[0], tokens, queries, key_s)
        else:
            if protocol.get("proxy"):
                proxy = judging_proxy.Nginx(free_port(), ports, folder)
            addresses = [f"127.0.0.1:{proxy.port}"] if proxy else [f"127.0.0.1:{port}" for port in ports]
            busiest = (lambda: max(apps, key=lambda app: connections(ports[apps.index(app)])).pid)
            results, usage = judging_load.drive(
                addresses, tokens, protocol["pace"], protocol["minutes"], key_s, [app.pid for app in apps], postmaster,
                admin_token if protocol.get("admin_every") else None, protocol.get("admin_every") or 5.0,
                (protocol["kill_after"], busiest) if protocol.get("kill_after") else None,
                protocol.get("settle_s", judging_load.SETTLE_S))
    finally:
        load_during = os.getloadavg()[0]
        if proxy is not None:
            proxy.stop()
        for app in apps:
            if app.poll() is None:
                os.killpg(app.pid, 15)
                app.wait(timeout=30)
    if any("typed" not in result for result in results):
        raise SystemExit("a judge did not finish: see the app log in " + str(folder))
    row = tally(store_kind, url, judges, results, key_s) | {"load_average": round(max(load_before, load_during), 2)}
    if protocol:
        row |= protocol_figures(results, usage, protocol) | admin_figures(url, usage)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", choices=["chromium", "protocol"], default="chromium",
                        help="judges in headless Chromium (default) or speaking the panel's protocol")
    parser.add_argument("--judges", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--queries", type=int, default=30, help="queries per Chromium judge (default 30)")
    parser.add_argument("--pace", type=float, default=20, help="queries a minute per protocol judge (default 20)")
    parser.add_argument("--minutes", type=float, default=2, help="the protocol judges' grading window (default 2)")
    parser.add_argument("--key-ms", type=float, default=30, help="milliseconds between keys (default 30)")
    parser.add_argument("--stores", nargs="+", choices=["sqlite", "postgresql"], default=["sqlite", "postgresql"])
    parser.add_argument("--apps", type=int, default=1, help="protocol: app processes on the store (default 1)")
    parser.add_argument("--proxy", action="store_true",
                        help="protocol: the guide's nginx in front of the apps (docs/guide/judging-team.md)")
    parser.add_argument("--admin-every", type=float, default=None, metavar="SECONDS",
                        help="protocol: an organizer reloads the admin page this often while the judges grade")
    parser.add_argument("--kill-after", type=float, default=None, metavar="SECONDS",
                        help="protocol: kill the app with the most connections this long into the window")
    args = parser.parse_args()
    if args.driver == "chromium" and not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM}: install Debian's chromium (or set QCAT_CHROMIUM)")
    protocol = ({"pace": args.pace, "minutes": args.minutes, "apps": args.apps, "proxy": args.proxy,
                 "admin_every": args.admin_every, "kill_after": args.kill_after} if args.driver == "protocol" else None)
    rows = []
    for store_kind in args.stores:
        server = None
        if store_kind == "postgresql":
            try:
                server = OwnPostgres()
            except (FileNotFoundError, KeyError, subprocess.CalledProcessError) as exc:
                print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
                continue
        try:
            for n in args.judges:
                folder = Path(tempfile.mkdtemp(prefix=f"qcat-bench-judging-{store_kind}-{n}-"))
                url = server.database(f"bench{n}") if server else f"sqlite:///{folder / 'bench.db'}"
                row = run(store_kind, url, n, args.queries, args.key_ms / 1000, folder, protocol,
                          server.postmaster() if server else None)
                rows.append(row)
                print(f"{store_kind:10} {n} judge{'s' * (n != 1)}: {row['queries']} queries, Enter -> next query ready "
                      f"median {row['enter_to_next_p50_s'] * 1000:.0f} ms, p90 {row['enter_to_next_p90_s'] * 1000:.0f} "
                      f"ms (max {row['enter_to_next_max_s'] * 1000:.0f} ms), loading shown {row['loading_shown']} times; "
                      f"{row['queries_per_minute_per_judge']:.0f} "
                      f"queries/min per judge; keys typed {row['keys_typed']}, grades stored as typed "
                      f"{row['grades_stored_as_typed']}; load average {row['load_average']}", file=sys.stderr)
                if protocol is not None:
                    print(f"{'':10} server CPU {row['server_cpu_s']} s = {row['server_cpu_s_per_graded_query']} s per graded "
                          f"query, peak memory {row['server_peak_memory_mb']} MB; driver CPU {row['driver_cpu_s']} s; "
                          f"round trip p50 {row['round_trip_p50_s']} s, p90 {row['round_trip_p90_s']} s", file=sys.stderr)
        finally:
            if server is not None:
                server.stop()
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
