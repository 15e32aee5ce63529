"""Issue 24's defects of the judging app, each shown fixed: a late submit that is no longer
needed moves the judge on (2), one changed grade of a listing in both groups is one change (6),
Markdown emphasis in a judge's name stays as typed in report.md (8), fractional claim timeouts
and a judge's count without gold (10), SIGTERM and SIGINT to ``qcat judge app`` stop the
Streamlit server too (11), no deprecated ``st.components.v1`` and a tested Streamlit range (12).
Defect 1 is in test_judging_app.py (the store-down message by the buttons), defects 3-5 in
test_judging_e2e.py and test_judging_own_engine.py (Chromium)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from judging_fixtures import (
    ROOT,
    child_env,
    free_port,
    panel_action,
    panel_answers,
    panel_data,
    panel_query,
    panel_send,
    panel_slots,
    qcat,
    wait_for,
)
from sqlalchemy import select
from streamlit.testing.v1 import AppTest

from qcat.judging.grading import assignment
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment, Judgment, JudgmentVersion

APP = str(ROOT / "judging_app" / "pages" / "app.py")


pytestmark = pytest.mark.usefixtures("fresh_sign_in_limits")


@pytest.fixture
def app_store(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    upgrade(url)
    store = open_store(url)
    monkeypatch.setenv("QCAT_DB_URL", url)
    yield store
    store.dispose()


def signed_in(token: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.text_input(key="token").input(token)
    next(b for b in at.button if b.label == "Sign in").click()
    return at.run()


def press(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    return at.run()


def shown(at: AppTest) -> str | None:
    return panel_query(at)


@pytest.mark.slow
def test_defect_2_a_late_submit_no_longer_needed_moves_the_judge_on_recording_nothing(app_store, monkeypatch):
    queries = [QuerySpec(f"query {i}", "head", [Listing(f"a{i}", "A")], [Listing(f"b{i}", "B")]) for i in range(3)]
    session_id = store_session(app_store, "one judge", "A", "B", queries, judges_per_query=1)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    (ann, ann_token), (bob, bob_token) = add_judge(app_store, "ann"), add_judge(app_store, "bob")
    first = signed_in(ann_token)
    late = shown(first)
    ann_late = panel_action(first, "submit", 2)
    released = [r.query for r in assignment.release(app_store, judge_id=ann.id)]  # qcat judge release --judge ann
    assert late in released and len(released) == 3  # the query on her screen and the 2 held ready
    second = signed_in(bob_token)
    assert shown(second) == late
    second = panel_send(second, panel_action(second, "submit", 3))
    assert [a["message"] for a in panel_answers(second)] == [f"Saved your 2 grades for “{late}”."]
    held = [shown["id"] for shown in panel_data(first)["queue"]][1:]  # what ann's panel holds after her Enter
    first = panel_send(first, ann_late, holding=held)  # ann's late submit
    assert not first.error and not first.exception
    [answer] = panel_answers(first)
    assert answer["status"] == "not_needed" and "other judges graded it" in answer["message"]
    assert "nothing was recorded" in answer["message"]
    assert panel_data(first)["queue"][0]["id"] == held[0]  # moved on to the next query, held by the panel
    with app_store.sessions() as session:
        ann_rows = session.execute(select(Assignment.status).join(Judgment, Judgment.judge_id == Assignment.judge_id,
                                                                  isouter=True)
                                   .where(Assignment.judge_id == ann.id)).all()
        graded = session.scalars(select(Judgment.id).where(Judgment.judge_id == ann.id)).all()
    assert graded == [] and ("skipped",) not in ann_rows  # no grade, no skip recorded


@pytest.mark.slow
def test_defect_6_one_changed_grade_of_a_listing_in_both_groups_is_one_change(app_store, monkeypatch):
    session_id = store_session(app_store, "shared", "A", "B", [QuerySpec("oak table", "torso", [
        Listing("same", "Oak dining table"), Listing("left", "Pine table")],
        [Listing("right", "Glass table"), Listing("same", "Oak dining table")])], seed=5)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    at = signed_in(add_judge(app_store, "ann")[1])
    at = panel_send(at, panel_action(at, "submit", 1))
    at.run()
    press(at, "Review or change")
    slots = panel_slots(at)
    assert [slot["side"] for slot in slots if slot["listing"] == "same"] == ["left"]  # graded once, in Group A
    at = panel_send(at, panel_action(at, "review", [3 if slot["listing"] == "same" else 1 for slot in slots]))
    changed = [a["message"] for a in panel_answers(at)]
    assert changed == ["Changed 1 grade of “oak table”."], changed  # was "Changed 2 grades"
    with app_store.sessions() as session:
        versions = session.execute(select(JudgmentVersion.listing_id, JudgmentVersion.side)
                                   .where(JudgmentVersion.grade == 3)).all()
    assert sorted(versions) == [("same", "left"), ("same", "right")]  # stored for both sides, as before


@pytest.mark.slow
def test_defect_7_wrong_tokens_lock_the_judge_and_the_client_out_before_any_scrypt(app_store, monkeypatch):
    from qcat.judging.grading import judges
    from qcat.judging.store.sign_in_limits import LIMITER, PER_CLIENT_ACCOUNT, Limiter

    judge, token = add_judge(app_store, "ann")
    token_id = token.split(".")[0]
    checked = []
    real = judges.tokens.hash_secret
    monkeypatch.setattr(judges.tokens, "hash_secret", lambda *args: checked.append(1) or real(*args))  # scrypt
    at = AppTest.from_file(APP, default_timeout=30).run()
    for attempt in range(PER_CLIENT_ACCOUNT):
        at.text_input(key="token").input(f"{token_id}.wrong-secret-{attempt:04d}-xxxxxxxxxxxxxxxxxxxxxx")
        press(at, "Sign in")
        assert at.error and "Too many" not in at.error[0].value
    assert checked
    scrypt_runs = len(checked)
    at.text_input(key="token").input(token)  # the right token, now
    press(at, "Sign in")
    assert at.error and at.error[0].value.startswith("Too many wrong tokens"), (at.error, at.exception, at.session_state)
    assert "judge_id" not in at.session_state
    assert len(checked) == scrypt_runs  # refused without checking the token: no scrypt
    # the lockout ends; a right token then clears the judge's count
    clock = [0.0]
    limiter = Limiter(per_client=3, per_account=2, window=60, lockout=30, clock=lambda: clock[0])
    limiter.failed("10.0.0.1", "id1")
    limiter.failed("10.0.0.2", "id1")  # two clients, one judge
    assert limiter.wait_seconds("10.0.0.3", "id1") == 30 and limiter.wait_seconds("10.0.0.3", "id2") == 0
    clock[0] = 31
    assert limiter.wait_seconds("10.0.0.3", "id1") == 0
    for account in ("a", "b", "c"):  # one client trying many token ids
        limiter.failed("10.0.0.9", account)
    assert limiter.wait_seconds("10.0.0.9", "z") == 30
    LIMITER.clear()


def test_defect_7_sign_in_keys_expire_on_the_server(app_store):
    from datetime import timedelta

    from sqlalchemy import func, update

    from qcat.judging.store import sign_ins
    from qcat.judging.store.models import SignIn, utcnow

    judge, _ = add_judge(app_store, "ann")
    key = sign_ins.remember(app_store, judge)
    assert sign_ins.recall(app_store, key, timedelta(hours=12)).id == judge.id
    with app_store.transaction() as session:
        session.execute(update(SignIn).values(created_at=utcnow() - timedelta(hours=13)))
    assert sign_ins.recall(app_store, key, timedelta(hours=24)) is not None  # a longer lifetime keeps it
    assert sign_ins.recall(app_store, key, timedelta(hours=12)) is None
    with app_store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(SignIn)) == 0  # deleted on the server
    from qcat.judging.commands.parsers import judge_parser

    assert judge_parser().parse_args(["app", "--sign-in-hours", "0.25"]).sign_in_hours == 0.25


def test_defect_8_emphasis_in_a_judge_name_stays_as_typed_in_report_md(app_store, tmp_path):
    from markdown_it import MarkdownIt

    from qcat.evaluation.report_files import write_report_files
    from qcat.judging.grading import judgments
    from qcat.judging.reporting.report import build_report, draw_all, render_html, render_markdown

    queries = [QuerySpec(f"q {i}", ("head", "torso", "tail")[i], [Listing(f"a{i}")], [Listing(f"b{i}")])
               for i in range(3)]
    session_id = store_session(app_store, "s", "A", "B", queries, judges_per_query=1)
    judge, _ = add_judge(app_store, "**Bold** _it_ `code` ~~gone~~")
    while (screen := assignment.next_query(app_store, judge.id, session_id)) is not None:
        judgments.submit(app_store, judge.id, screen.query_id, {(i.listing_id, side): 2 for side, group in
                                                                (("left", screen.left), ("right", screen.right))
                                                                for i in group}, flag_note="a *starred* note")
    report = build_report(app_store, session_id, bootstrap=0)
    markdown = write_report_files(report, tmp_path / "out", draw_all(report), render_markdown, render_html)[1].read_text()
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    notes = html.split("Flag notes</h3>")[1]
    for tag in ("<strong>", "<em>", "<code>", "<s>", "<del>"):
        assert tag not in notes, tag
    assert "**Bold** _it_ `code` ~~gone~~" in notes and "a *starred* note" in notes


def test_defect_10_claim_timeout_takes_fractions_of_a_minute(tmp_path):
    from qcat.judging.commands.app import app_command
    from qcat.judging.commands.parsers import judge_parser

    args = judge_parser().parse_args(["app", "--claim-timeout", "0.5"])
    assert args.claim_timeout == 0.5
    _, env = app_command("sqlite:///x.db", None, 8501, "127.0.0.1", args.claim_timeout)
    assert env["QCAT_CLAIM_TIMEOUT"] == "0.5"
    result = qcat("judge", "app", "--claim-timeout", "0", "--url", tmp_path / "none.db")
    assert result.returncode != 0 and "--claim-timeout" in result.stderr and "Traceback" not in result.stderr


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_defect_11_a_signal_to_the_app_wrapper_alone_stops_the_streamlit_server(tmp_path, signum):
    db = tmp_path / "app.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    port = free_port()
    log = (tmp_path / "app.log").open("w")
    wrapper = subprocess.Popen([sys.executable, "-m", "qcat.cli", "judge", "app", "--url", str(db), "--port", str(port),
                                "--address", "127.0.0.1"], cwd=ROOT, env=child_env(), stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: _healthy(port), timeout=40, interval=0.25)
        servers = _children(wrapper.pid)
        assert len(servers) == 1
        os.kill(wrapper.pid, signum)  # the wrapper alone, not its process group
        assert wrapper.wait(timeout=20) == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (os.path.exists(f"/proc/{servers[0]}") or _healthy(port)):
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{servers[0]}") and not _healthy(port)
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
            wrapper.wait(timeout=10)
        log.close()
    assert "judging app stopped" in (tmp_path / "app.log").read_text()


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_issue_31_defect_4_sigkill_of_the_wrapper_takes_the_streamlit_server_with_it(tmp_path):
    db = tmp_path / "app.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    port = free_port()
    with (tmp_path / "app.log").open("w") as log:
        wrapper = subprocess.Popen([sys.executable, "-m", "qcat.cli", "judge", "app", "--url", str(db), "--port",
                                    str(port), "--address", "127.0.0.1"], cwd=ROOT, env=child_env(), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: _healthy(port), timeout=40, interval=0.25)
        servers = _children(wrapper.pid)
        assert len(servers) == 1
        os.kill(wrapper.pid, signal.SIGKILL)  # the wrapper alone, with no chance to pass anything on
        wrapper.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (_alive(servers[0]) or _healthy(port)):
            time.sleep(0.1)
        assert not _alive(servers[0]) and not _healthy(port)
    finally:
        try:
            os.killpg(wrapper.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_defect_12_no_deprecated_components_api_and_a_tested_streamlit_range():
    import streamlit
    from packaging.specifiers import SpecifierSet

    sources = "\n".join(path.read_text() for path in (ROOT / "judging_app").rglob("*.py"))
    assert not re.search(r"components\.v1|components\.html\(", sources.replace("``st.components.v1.html``", ""))
    pyproject = (ROOT / "pyproject.toml").read_text()
    pin = re.search(r'"streamlit([^"]*)"', pyproject).group(1)
    assert "<" in pin and streamlit.__version__ in SpecifierSet(pin)


@pytest.mark.slow
def test_defect_10_a_session_that_names_its_judges_is_theirs_alone(app_store, monkeypatch, tmp_path):
    from qcat.judging.grading.sessions import change_members

    queries = [QuerySpec(f"query {i}", "head", [Listing(f"a{i}", "A")], [Listing(f"b{i}", "B")]) for i in range(2)]
    private = store_session(app_store, "private", "A", "B", queries, display_name="Private round")
    store_session(app_store, "open", "A", "B", queries, display_name="Open round")
    (ann, ann_token), (bob, bob_token) = add_judge(app_store, "ann"), add_judge(app_store, "bob")
    assert change_members(app_store, "private", add=["ann"]) == ("private", ["ann"])
    monkeypatch.delenv("QCAT_JUDGE_SESSION", raising=False)
    at = signed_in(bob_token)  # bob may judge only the open session: it is chosen for him
    assert not at.error and not at.selectbox and shown(at) is not None
    with app_store.sessions() as session:
        assert session.scalar(select(Assignment.session_id).where(Assignment.judge_id == bob.id)) != private
    at = signed_in(ann_token)  # ann chooses between both
    assert sorted(o.split(" (")[0] for o in at.selectbox(key="session_choice").options) == ["Open round", "Private round"]
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(private))
    at = signed_in(bob_token)
    assert [e.value for e in at.error] == [assignment.NOT_A_MEMBER]
    with pytest.raises(Exception, match="not a judge of this session"):
        assignment.next_query(app_store, bob.id, private)
    db = app_store.engine.url.database
    result = qcat("judge", "members", "private", "--add", "bob", "--remove", "ann", "--url", db)
    assert result.returncode == 0 and result.stdout.split() == ["bob"], result.stderr
    assert assignment.next_query(app_store, bob.id, private) is not None
    result = qcat("judge", "members", "private", "--add", "nobody", "--url", db)
    assert result.returncode != 0 and "no judge named 'nobody'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_defect_9_long_session_names_are_cut_in_the_admin_tables(app_store):
    import json

    from qcat.judging.grading.judges import add_admin

    long_name = "nb vs hybrid " + "with a very long description of the models compared " * 3
    store_session(app_store, long_name.strip(), "A", "B",
                  [QuerySpec("q", "head", [Listing("a", "A")], [Listing("b", "B")])])
    at = signed_in(add_admin(app_store, "lead")[1])
    assert not at.exception
    progress = at.dataframe[0]
    config = json.loads(progress.proto.columns)
    assert config["session"]["width"] == "medium" and config["judges see"]["width"] == "medium"
    option = at.selectbox(key="admin_alpha_session").options[0]
    assert len(option) <= 60 and option.endswith("…")
