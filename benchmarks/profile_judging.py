"""Where the judging app's CPU goes per graded query: py-spy samples a real `qcat judge app` while
protocol judges grade (issue 55 item 2).

    pip install py-spy   # once
    python benchmarks/profile_judging.py --judges 5 --pace 20 --minutes 1.5

The load is bench_judging.py's protocol driver on SQLite (the same judges, pace and keys). py-spy
(`record --subprocesses --format raw`, 100 samples a second, GIL-holding threads only, so a sample is
the CPU a thread spends in Python or in C under it) samples the app and its Streamlit server over
the grading window. Printed: the samples and the CPU seconds per graded query the driver measured;
the share of samples per part of the app (a sample goes to the first part, in the order of PARTS,
that any of its frames matches); the functions with most samples inclusive and by self time. The
raw stacks are kept (``--keep``) for a flame graph (e.g. ``flamegraph.pl``) or a look with grep.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_judging  # beside this file
import judging_load

# Parts of the app: (name, pattern, leaf only), matched against a sample's frames (function and file)
# from the leaf up; the process and thread frames at the root are never matched.
PARTS = [
    ("gc.collect(2) after every script run (runner.postScriptGC)",
     re.compile(r"^ScriptRunner\._on_script_finished "), True),
    ("sign-in (the token's scrypt, once a judge)", re.compile(r"authenticate_any|hash_secret"), False),
    ("waits py-spy counted as busy (Popen.wait, event loop, watcher sleep)",
     re.compile(r"^(Popen\._wait|Runner\.run|PollingPathWatcher\._schedule\.<locals>\.task|select|poll) "), True),
    ("protobuf: serializing ForwardMsgs", re.compile(r"SerializeToString|serialize_forward_msg|_pb2|protobuf"), False),
    ("JSON encode/decode", re.compile(r"json/(encoder|decoder|__init__)\.py"), False),
    ("SQLAlchemy / SQLite (the store)", re.compile(r"sqlalchemy/|sqlite3"), False),
    ("component args (components v2)", re.compile(r"components/v2/|bidi_component"), False),
    ("qcat grading (desk, assignment, windows)", re.compile(r"judging_app/grading/|qcat/judging/grading/"), False),
    ("qcat page script (app.py, panel.py)", re.compile(r"judging_app/pages/|qcat/judging/pages/"), False),
    ("Streamlit widgets/state", re.compile(r"streamlit/runtime/state/|streamlit/elements/"), False),
    ("Streamlit script runner (exec, rerun, fragments)", re.compile(r"streamlit/runtime/scriptrunner"), False),
    ("Streamlit forward-msg queue / session", re.compile(r"forward_msg|app_session|message_cache|runtime\.py"), False),
    ("Tornado / websocket / asyncio", re.compile(r"tornado/|websocket|asyncio/"), False),
]


def parse(raw: Path) -> list[tuple[list[str], int]]:
    """py-spy raw output: one line per stack, frames root first separated by ';', then a count."""
    stacks = []
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        if head and count.isdigit():
            stacks.append((head.split(";"), int(count)))
    return stacks


def short(frame: str) -> str:
    """'func (path/to/file.py:12)' -> 'func (file.py:12)' with the package folder kept."""
    match = re.match(r"(.*) \((.*):(\d+)\)$", frame)
    if not match:
        return frame
    name, path, line = match.groups()
    parts = Path(path).parts
    return f"{name} ({'/'.join(parts[-2:])}:{line})"


def without_line(frame: str) -> str:
    return re.sub(r":\d+\)$", ")", short(frame))


def report(stacks: list[tuple[list[str], int]], graded: int, cpu_s: float, rate: int, top: int) -> None:
    total = sum(count for _, count in stacks)
    if not total:
        print("no samples")
        return
    print(f"{total:,} samples; the app's CPU over the grading window {cpu_s:.1f} s (/proc) over {graded} graded "
          f"queries = {cpu_s / max(graded, 1):.3f} s per graded query")
    parts = collections.Counter()
    inclusive = collections.Counter()
    own = collections.Counter()
    for frames, count in stacks:
        code = [frame for frame in frames if not frame.startswith(("process ", "thread "))]
        for name, pattern, leaf in PARTS:
            if any(pattern.search(frame) for frame in (code[-1:] if leaf else reversed(code))):
                parts[name] += count
                break
        else:
            parts["other"] += count
        for frame in set(map(without_line, code)):
            inclusive[frame] += count
        if code:
            own[without_line(code[-1])] += count

    # The sign-in is before the grading window and the waits are no CPU: left out of the share that the
    # measured CPU per graded query is spread over (on a busy machine py-spy's samples also count a
    # thread waiting for a core, so the samples are not seconds of CPU).
    busy = total - parts[PARTS[1][0]] - parts[PARTS[2][0]]
    per = cpu_s / max(graded, 1) / max(busy, 1)
    print(f"ms/query below: a share of the {busy:,} samples that are neither the sign-in nor waits, times the "
          f"measured CPU per graded query\n")

    def line(label: str, count: int) -> str:
        spread = "    (left out)" if label in (PARTS[1][0], PARTS[2][0]) else f"{count * per * 1000:6.1f} ms/query"
        return f"  {100 * count / total:5.1f}%  {spread:>14}  {label}"

    print("By part (each sample once, the first part in this order that its stack holds):")
    for name, count in parts.most_common():
        print(line(name, count))
    print(f"\nInclusive, top {top} (a function and all it calls):")
    for name, count in inclusive.most_common(top):
        print(line(name, count))
    print(f"\nSelf, top {top}:")
    for name, count in own.most_common(top):
        print(line(name, count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--pace", type=float, default=20)
    parser.add_argument("--minutes", type=float, default=1.5)
    parser.add_argument("--key-ms", type=float, default=30)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples a second (default 100)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, help="keep py-spy's raw stacks here")
    args = parser.parse_args()
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    folder = Path(tempfile.mkdtemp(prefix="qcat-profile-judging-"))
    url = f"sqlite:///{folder / 'bench.db'}"
    queries = int(args.pace * args.minutes) + 3
    *tokens, _admin = bench_judging.prepare(url, args.judges, queries, folder)
    port = bench_judging.free_port()
    app = bench_judging.start_app(url, port, folder / "app.log")
    raw = args.keep or folder / "stacks.txt"
    load_before = os.getloadavg()[0]
    sampler = subprocess.Popen([spy, "record", "--pid", str(app.pid), "--subprocesses", "--format", "raw",
                                "--rate", str(args.rate), "--nonblocking", "--threads", "--output", str(raw)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    try:
        results, usage = judging_load.drive([f"127.0.0.1:{port}"], tokens, args.pace, args.minutes, args.key_ms / 1000,
                                            [app.pid])
    finally:
        load_during = os.getloadavg()[0]
        sampler.send_signal(signal.SIGINT)
        try:
            _, err = sampler.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            sampler.kill()
            err = ""
        os.killpg(app.pid, signal.SIGTERM)
        app.wait(timeout=30)
    graded = sum(r["statuses"].get("saved", 0) for r in results)  # submits answered "saved"
    print(f"{args.judges} judges at {args.pace:g} queries/min for {args.minutes:g} min on SQLite; load average "
          f"{load_before:.2f} before, {load_during:.2f} at the end; window {usage.get('window_s', 0):.1f} s")
    if not raw.exists():
        raise SystemExit(f"py-spy wrote nothing: {err}")
    report(parse(raw), graded, usage["server_cpu_s"], args.rate, args.top)
    print(f"\nraw stacks: {raw}")


if __name__ == "__main__":
    sys.exit(main())
