"""End to end, judging your own search engine: two systems' result lists (JSON Lines, with
pictures served over HTTP and links) become a session with ``qcat judge create-session --results
--results --differing-only 5 --guidelines``; in headless Chromium two judges read the guidelines
and grade every query with the digit keys and Enter only; an admin settles one disagreement on
the admin page; then the report's Table 5 and seconds per query are checked against the rows in
the database, computed here from the definitions.

(The screenshots in docs/ come from test_judging_e2e.py.)
"""

from __future__ import annotations

import json
import math
import statistics
import struct
import threading
import time
import zlib
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from judging_fixtures import CHROMIUM, add_judges, panel_shown, qcat, running_judging_app, signed_in_panel, type_keys
from sqlalchemy import select

from qcat.judging.grading.desk import GradingDesk
from qcat.judging.grading.imports import read_results
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import select_imported, store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment, Judge, Judgment, QueryReview, ResultItem, ResultList, SessionQuery

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
TIMEOUT_MS = 20_000
SEGMENTS = ("head", "torso", "tail")
GUIDELINES = "# Shoe search guidelines\n\nA **size** mismatch is at most *Good*.\n"


def png(rgb: tuple[int, int, int], size: int = 24) -> bytes:
    """A plain square PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.fixture
def image_server():
    """Listing pictures over HTTP, as a search engine's image CDN would serve them."""
    picture = png((200, 60, 40))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server name
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(picture)))
            self.end_headers()
            self.wfile.write(picture)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def write_results(tmp_path: Path, images: str) -> tuple[Path, Path]:
    """Six queries (two per segment); the last two show the same top 5 in both systems."""
    today, candidate = [], []
    for q in range(6):
        query = f"running shoes {q}"
        base = [f"P{q}-{i}" for i in range(5)]
        cand = base if q >= 4 else [f"N{q}-0", base[1], f"N{q}-2", base[3], f"N{q}-4"]
        for rows, listings in ((today, base), (candidate, cand)):
            for rank, listing in enumerate(listings, start=1):
                rows.append({"query": query, "rank": rank, "listing_id": listing, "title": f"Shoe {listing}",
                             "category": "Shoes > Running", "brand": "Acme", "price": 10 + rank,
                             "image_url": f"{images}/{listing}.png", "link": f"https://shop.example/{listing}",
                             "segment": SEGMENTS[q % 3]})
    paths = tmp_path / "today.jsonl", tmp_path / "candidate.jsonl"
    for path, rows in zip(paths, (today, candidate)):
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return paths


@pytest.fixture
def own_engine_app(tmp_path, image_server):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "own.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    tokens = dict(zip(("ann", "bob"), add_judges(db, ("ann", "bob"))))
    result = qcat("judge", "add-admin", "lead", "--url", db)
    tokens["lead"] = result.stdout.strip()
    guidelines = tmp_path / "guidelines.md"
    guidelines.write_text(GUIDELINES)
    today, candidate = write_results(tmp_path, image_server)
    result = qcat("judge", "create-session", "--results", today, "--results", candidate, "--differing-only", 5,
                  "--judges-per-query", 2, "--guidelines", guidelines, "--display-name", "Shoes", "--url", db)
    assert result.returncode == 0, result.stderr
    assert "2 queries with the same top 5 in both systems left out" in result.stderr
    with running_judging_app(db, tmp_path / "app.log") as url:
        yield url, db, tokens


def grade_by_keys(page, digits_for) -> list[str]:
    """Grade every query the judge is given with digit keys and Enter only, typed the moment each
    query is shown; the queries graded."""
    graded = []
    while True:
        page.wait_for_function("() => window.qcatPanel && window.qcatPanel.data && "
                               "(window.qcatPanel.current || window.qcatPanel.data.mode === 'done')")
        if page.evaluate("() => !window.qcatPanel.current"):
            page.get_by_text("All done").wait_for()
            return graded
        shown = panel_shown(page)
        type_keys(page, [*digits_for(len(shown["slots"])), "Enter"])
        page.get_by_text(f"Saved your {len(shown['slots'])} grades for “{shown['text']}”").wait_for()
        graded.append(shown["text"])


def ndcg_star(grades: list[float]) -> float:
    """NDCG* over the top min(5, returned): DCG = Σ 2^rel / log2(i+1), IDCG all Excellent (3)."""
    top = grades[:5]
    dcg = sum(2 ** g / math.log2(i + 2) for i, g in enumerate(top))
    ideal = sum(2 ** 3 / math.log2(i + 2) for i in range(len(top)))
    return dcg / ideal


def test_both_engines_files_become_cards_with_their_pictures_links_and_facts(tmp_path):
    """The session the browser test judges, built in-process: both files read, the 2 queries with
    the same top 5 in both systems left out (one torso, one tail), and every listing drawn for the
    panel with its picture, its link, its brand and price, its category escaped."""
    images = "http://images.test"
    imported = read_results(list(write_results(tmp_path, images)))
    built = select_imported(imported.queries, None, differing_top=5)
    assert built.stats["identical_skipped"] == {"head": 0, "torso": 1, "tail": 1}
    assert sorted(query.text for query in built.queries) == [f"running shoes {q}" for q in range(4)]
    url = f"sqlite:///{tmp_path / 'own.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        session_id = store_session(store, "own", *imported.systems, built.queries, judges_per_query=2, seed=1)
        queue = GradingDesk(store, add_judge(store, "ann")[0].id, session_id, prefetch=3).queue()
    finally:
        store.dispose()
    assert len(queue) == 4
    for shown in queue:
        cards = shown["left"] + shown["right"]
        assert len(cards) == 10 and len(shown["slots"]) == 8  # ranks 2 and 4 are one listing in both groups
        for card in cards:
            assert (card["image"], card["link"]) == (f"{images}/{card['listing']}.png",
                                                     f"https://shop.example/{card['listing']}")
            assert card["facts"] == f"Brand: Acme · Price: {10 + card['position']}.00"
            assert card["category"] == "Shoes &gt; Running"


def signed_in(browser, url: str, token: str):
    """A fresh browser context at 1280x800 whose page has signed in with ``token``."""
    return signed_in_panel(browser, url, token)


@pytest.mark.slow  # over 3 s: `qcat` commands, a Streamlit server and Chromium
def test_own_engine_session_graded_by_keys_settled_and_reported(own_engine_app, tmp_path):
    url, db, tokens = own_engine_app
    started = time.perf_counter()
    shots = {}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            for name, digits_for in (("ann", lambda n: [3] * n), ("bob", lambda n: [0] + [2] * (n - 1))):
                context, page = signed_in(browser, url, tokens[name])
                help_panel = page.locator(".qcat-panel .help")
                help_panel.get_by_text("Shoe search guidelines").wait_for()  # shown on first sign-in
                page.keyboard.press("Escape")
                help_panel.wait_for(state="hidden")
                if name == "ann":
                    shown = panel_shown(page)
                    thumbs = page.locator(".qcat-panel img.thumb")
                    thumbs.first.wait_for()
                    page.wait_for_function("() => Array.from(window.qcatPanel.root.querySelectorAll('img.thumb'))"
                                           ".every(i => i.complete && i.naturalWidth === 24)")
                    assert page.locator('.qcat-panel a[href^="https://shop.example/"]').count() >= 5
                    page.keyboard.press("?")  # the guidelines and keys, one key away
                    help_panel.get_by_text("Shoe search guidelines").wait_for()
                    assert help_panel.get_by_text("opens this help").is_visible()
                    page.keyboard.press("?")
                    type_keys(page, [3, 2, 1])
                    layout = page.evaluate("""() => {
                      const root = window.qcatPanel.root;
                      return {cut: Array.from(root.querySelectorAll('button')).filter(b => b.offsetParent && b.scrollWidth > b.clientWidth + 1).map(b => b.innerText),
                              lines: Array.from(root.querySelectorAll('.grades')).map(g => new Set(Array.from(g.querySelectorAll('button')).map(c => Math.round(c.getBoundingClientRect().top))).size),
                              submit: root.querySelector('.submit').getBoundingClientRect().bottom};
                    }""")
                    assert layout["cut"] == [] and set(layout["lines"]) == {1} and layout["submit"] <= 800, layout
                    shots["1280x800"] = tmp_path / "grading_1280x800.png"
                    page.screenshot(path=str(shots["1280x800"]))
                    type_keys(page, [3] * (len(shown["slots"]) - 3) + ["Enter"])
                    page.get_by_text(f"Saved your {len(shown['slots'])} grades").wait_for()
                graded = grade_by_keys(page, digits_for)
                assert len(graded) == (3 if name == "ann" else 4), graded
                context.close()
            # the guidelines open on a judge's first sign-in only
            context, page = signed_in(browser, url, tokens["ann"])
            page.get_by_text("All done").wait_for()
            page.wait_for_timeout(500)
            assert not page.locator(".qcat-panel .help").is_visible()
            context.close()
            # the admin settles the first disagreement of the queue
            context, page = signed_in(browser, url, tokens["lead"])
            page.get_by_role("heading", name="Disagreements").wait_for()
            page.get_by_text("1 Acceptable").first.click()  # in the first disagreement of the queue
            page.get_by_role("button", name="Settle with these grades").first.click()
            page.get_by_text("Settled “").wait_for()
            context.close()
        finally:
            browser.close()

    store = open_store(str(db))
    with store.sessions() as session:
        settled = session.execute(select(QueryReview.query_id, QueryReview.listing_id, QueryReview.grade)
                                  .where(QueryReview.action == "settled")).all()
        judged = session.execute(
            select(Judgment.query_id, ResultList.system, ResultItem.position, Judgment.listing_id, Judgment.grade,
                   Judge.name)
            .join(Judge, Judge.id == Judgment.judge_id)
            .join(ResultList, (ResultList.query_id == Judgment.query_id) & (ResultList.side == Judgment.side))
            .join(ResultItem, (ResultItem.list_id == ResultList.id) & (ResultItem.listing_id == Judgment.listing_id))
        ).all()
        queries = dict(session.execute(select(SessionQuery.id, SessionQuery.segment)).all())
        timed = session.execute(select(Judge.name, SessionQuery.segment, Assignment.active_seconds)
                                .join(Judge, Judge.id == Assignment.judge_id)
                                .join(SessionQuery, SessionQuery.id == Assignment.query_id)
                                .where(Assignment.status == "done")).all()
    store.dispose()
    assert len(queries) == 4 and len(timed) == 8  # the two identical queries were never given to judges
    assert len(settled) == 1 and settled[0][2] == 1
    # every first listing got 3 from ann and 0 from bob: the disagreement; the others 3 and 2
    grades = defaultdict(list)
    for query_id, system, position, listing, grade, judge in judged:
        grades[(query_id, system, position)].append(grade)
    settled_at = {(q, listing): grade for q, listing, grade in settled}
    listing_at = {(q, system, position): listing for q, system, position, listing, _, _ in judged}
    ndcg = defaultdict(dict)
    for (query_id, system, position), given in grades.items():
        grade = settled_at.get((query_id, listing_at[(query_id, system, position)]), statistics.mean(given))
        ndcg[query_id].setdefault(system, {})[position] = grade
    per_query = {q: {s: ndcg_star([g for _, g in sorted(ndcg[q][s].items())]) for s in ("baseline", "target")}
                 for q in queries}

    out = tmp_path / "report"
    result = qcat("judge", "report", "1", "--url", db, "--out", out, "--bootstrap", "0", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {row["segment"]: row for row in report["table5"]}
    for segment in (*SEGMENTS, "mix"):
        ids = [q for q, s in queries.items() if segment in ("mix", s)]
        assert rows[segment]["queries"] == len(ids)
        assert rows[segment]["baseline"] == pytest.approx(statistics.mean(per_query[q]["baseline"] for q in ids))
        assert rows[segment]["target"] == pytest.approx(statistics.mean(per_query[q]["target"] for q in ids))
        wins = sum(per_query[q]["target"] > per_query[q]["baseline"] + 1e-12 for q in ids)
        losses = sum(per_query[q]["target"] < per_query[q]["baseline"] - 1e-12 for q in ids)
        identical = {"head": 0, "torso": 1, "tail": 1, "mix": 2}[segment]  # queries 4 (torso) and 5 (tail)
        assert (rows[segment]["win"], rows[segment]["loss"]) == (wins, losses)
        assert rows[segment]["tie"] == len(ids) - wins - losses + identical
        assert rows[segment]["identical_ties"] == identical
    seconds = defaultdict(list)
    for judge, segment, active in timed:
        seconds[judge].append(active)  # measured by the panel
    timing = {row["judge"]: row for row in report["timing"]["judges"]}
    for judge, values in seconds.items():
        assert timing[judge]["median_seconds"] == pytest.approx(statistics.median(values), abs=1e-3)
        assert timing[judge]["queries"] == 4
    markdown = (out / "report.md").read_text()
    assert "Seconds per query" in markdown and "2 queries showed the same top 5" in markdown
    for shot in shots.values():
        assert shot.stat().st_size > 10_000
    print(f"\nown engine E2E: 8 query judgments by keys, 1 settlement, report checked in "
          f"{time.perf_counter() - started:.1f} s; median seconds per query "
          + ", ".join(f"{j} {statistics.median(v):.2f}" for j, v in sorted(seconds.items())))
