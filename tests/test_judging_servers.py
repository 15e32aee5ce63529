"""Issue 55 item 4: two `qcat judge app` processes on one PostgreSQL store, behind the nginx block of
docs/guide/judging-team.md, with judges that speak the panel's protocol (benchmarks/judging_load.py).
The busier process is killed mid-sprint (SIGKILL); its judges' pages connect again through the proxy
to the other process. Then every grade typed is in the store as typed, no query has more judgments
than asked, the claim counts match the assignments, nothing is recorded twice, the gold questions
and the admin page's figures match a recount of the store."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_judging  # noqa: E402
import judging_proxy  # noqa: E402

from qcat.judging.grading.gold import gold_summary  # noqa: E402
from qcat.judging.store.connection import open_store  # noqa: E402
from qcat.judging.store.models import (  # noqa: E402
    Assignment,
    GoldGrade,
    Judge,
    Judgment,
    JudgmentVersion,
    SessionQuery,
)

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def test_the_guides_nginx_block_is_what_the_proxy_runs():
    block = judging_proxy.configured(9000, [9001, 9002, 9003])
    assert "listen 127.0.0.1:9000;" in block and "listen 8500" not in block
    assert [line.strip() for line in block.splitlines() if line.strip().startswith("server 127")] == [
        f"server 127.0.0.1:{port} max_fails=1 fail_timeout=10s;" for port in (9001, 9002, 9003)]
    assert "hash $qcat_route consistent;" in block and "proxy_set_header Upgrade $http_upgrade;" in block


@pytest.mark.slow
@pytest.mark.skipif(NGINX is None, reason="no nginx: .ci/run installs Debian's nginx")
def test_two_servers_on_one_store_lose_nothing_when_one_is_killed(pg_url, tmp_path):
    protocol = {"pace": 60, "minutes": 0.6, "apps": 2, "proxy": True, "kill_after": 12, "admin_every": 4,
                "judges_per_query": 2, "gold": 2,
                "settle_s": 240}  # beside the rest of the suite the last answers can take over a minute (CI)
    row = bench_judging.run("postgresql", pg_url, 6, 0, 0.02, tmp_path, protocol=protocol)

    assert row["killed_at_s"] is not None and row["reconnects"] >= 1, row  # the killed process's judges moved
    assert row["answers"] == {"saved": row["queries"]} and row["unsettled_judges"] == 0, row
    assert row["keys_typed"] > 0 and row["grades_stored_as_typed"] == row["keys_typed"], row  # nothing lost
    assert row["admin_reloads"] > 0 and row["admin_figures_right"], row

    store = open_store(pg_url)
    try:
        with store.sessions() as session:
            queries = {q.id: q for q in session.scalars(select(SessionQuery))}
            rows = session.execute(select(Assignment.judge_id, Assignment.query_id, Assignment.status)).all()
            judgments = session.execute(select(Judgment.judge_id, Judgment.query_id, Judgment.listing_id,
                                               Judgment.grade)).all()
            history = session.execute(select(JudgmentVersion.judge_id, JudgmentVersion.query_id,
                                             JudgmentVersion.listing_id, JudgmentVersion.side)).all()
            known = {(g.query_id, g.listing_id): g.grade for g in session.scalars(select(GoldGrade))}
            names = dict(session.execute(select(Judge.id, Judge.name)).all())
        summary = gold_summary(store, 1)
    finally:
        store.dispose()

    done = Counter(query for _, query, status in rows if status == "done")
    live = Counter(query for _, query, status in rows if status in ("open", "done"))
    assert Counter((judge, query) for judge, query, _ in rows).most_common(1)[0][1] == 1
    for query_id, record in queries.items():
        if record.gold:
            continue
        assert done[query_id] <= 2 + record.extra_judges  # never more judges than asked
        assert record.claims == live[query_id]  # the claim counts match the assignments
    assert len(history) == len(set(history)) == len(judgments)  # each grade recorded once (none was changed)

    gold_ids = {query_id for query_id, record in queries.items() if record.gold}
    assert len(gold_ids) == 2
    gold_done = Counter(judge for judge, query, status in rows if status == "done" and query in gold_ids)
    assert gold_done and all(n <= 2 for n in gold_done.values())
    graded = {(judge, query, listing): grade for judge, query, listing, grade in judgments if query in gold_ids}
    exact: dict[int, list[bool]] = {}
    for (judge, query, listing), grade in graded.items():  # a listing shown in both groups is graded once
        exact.setdefault(judge, []).append(grade == known[(query, listing)])
    by_judge = {row["judge_id"]: row for row in summary["judges"]}
    assert set(by_judge) == set(gold_done)
    for judge, row in by_judge.items():
        assert row["queries"] == gold_done[judge], names[judge]
        assert row["exact"] == pytest.approx(sum(exact[judge]) / len(exact[judge])), names[judge]
