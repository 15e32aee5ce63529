"""What one grading-panel message costs the store, without Streamlit: a desk (qcat.judging.grading.desk)
takes a submit and answers with the next queries, as `qcat judge app` does per panel message, on a
fresh SQLite store (the same set-up as bench_judging.py), and every SQL statement is counted.

Run: python benchmarks/judging_desk_cost.py [--messages 150] [--hold 7]

Prints the milliseconds of CPU per message in the desk's three steps (take: the submit; queue: the
pick and the new screens; progress: the counts) and the statements per message by kind.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_judging  # noqa: E402
from sqlalchemy import event  # noqa: E402

from qcat.judging.grading.desk import GradingDesk  # noqa: E402
from qcat.judging.store.connection import open_store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=150)
    parser.add_argument("--hold", type=int, default=7, help="queries the panel asks to hold (default 7)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="qcat-desk-cost-"))
    url = f"sqlite:///{folder / 'desk.db'}"
    bench_judging.prepare(url, 3, args.messages + 50, folder)
    store = open_store(url)
    statements: collections.Counter = collections.Counter()

    @event.listens_for(store.engine, "before_cursor_execute")
    def count(conn, cursor, statement, params, context, executemany):
        statements[" ".join(statement.split()[:2])] += 1

    desk = GradingDesk(store, 1, 1)
    holding = [shown["id"] for shown in desk.queue([], args.hold)]
    statements.clear()
    spent = collections.Counter()
    for i in range(args.messages):
        shown = desk.drawn[holding[0]]
        action = {"id": f"a{i}", "kind": "submit", "query": holding[0], "text": "q", "note": None, "seconds": 3,
                  "grades": [[slot["listing"], slot["side"], 1] for slot in shown["slots"]]}
        for step, run in (("take", lambda: desk.take([action])),
                          ("queue", lambda: desk.queue(holding[1:], args.hold)),
                          ("progress", desk.progress)):
            began = time.process_time()
            result = run()
            spent[step] += time.process_time() - began
            if step == "queue":
                holding = [q["id"] for q in result]
    n = args.messages
    print(f"{n} messages, {args.hold} queries held: " + ", ".join(f"{step} {spent[step] / n * 1000:.2f} ms"
                                                               for step in ("take", "queue", "progress"))
          + f" of CPU per message; {sum(statements.values()) / n:.1f} SQL statements per message")
    for statement, times in statements.most_common():
        print(f"{times / n:6.2f}  {statement}")


if __name__ == "__main__":
    main()
