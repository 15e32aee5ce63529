"""Who may judge a session: the session exists, the judge exists and is active, and the session
names no judge (open to all) or names this one."""

from __future__ import annotations

from sqlalchemy import exists, select

from qcat.errors import InputError
from qcat.judging.store.models import Judge, JudgingSession, SessionJudge

INACTIVE = "this judge has been deactivated: ask the session's organizer"
NOT_A_MEMBER = "you are not a judge of this session: ask its organizer to add you (qcat judge members)"


def may_judge(session, judge_id: int, session_id: int) -> bool:
    """Whether the judge may judge the session: it names no judge (open to all), or names this one
    (``session_judges``, :func:`qcat.judging.grading.sessions.change_members`)."""
    named = session.scalar(select(exists().where(SessionJudge.session_id == session_id)))
    return not named or session.scalar(select(exists().where(SessionJudge.session_id == session_id,
                                                             SessionJudge.judge_id == judge_id)))


def check_member(session, judge_id: int, session_id: int) -> None:
    if not may_judge(session, judge_id, session_id):
        raise InputError(NOT_A_MEMBER)


def check_session(session, session_id: int) -> JudgingSession:
    record = session.get(JudgingSession, session_id)
    if record is None:
        raise InputError(f"judging session {session_id!r} does not exist")
    return record


def judge_exists(session, judge_id: int) -> bool:
    return session.get(Judge, judge_id) is not None
