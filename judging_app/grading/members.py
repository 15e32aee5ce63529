"""Per-session judge membership: a session may name its judges (``qcat judge members SESSION
--add NAME``, or ``create-session --judges``); then only they see it in the app's session
choice and get its queries. A session that names no judge is open to every active judge.
"""

from __future__ import annotations

from sqlalchemy import delete, exists, select

from qcat.judging.grading.assignment import NOT_A_MEMBER, check_member, may_judge  # noqa: F401 - this module's API
from qcat.judging.grading.judges import find_judge
from qcat.judging.grading.sessions import find_session
from qcat.judging.store.connection import Store
from qcat.judging.store.models import Judge, SessionJudge


def change_members(store: Store, key: str | int, add: list[str] = (), remove: list[str] = ()) -> tuple[str, list[str]]:
    """Add and remove judges (by name) of a session; returns its name and its judges afterwards."""
    with store.transaction() as session:
        record = find_session(session, key)
        for name in add:
            judge = find_judge(session, name)
            if not session.scalar(select(exists().where(SessionJudge.session_id == record.id,
                                                        SessionJudge.judge_id == judge.id))):
                session.add(SessionJudge(session_id=record.id, judge_id=judge.id))
        for name in remove:
            judge = find_judge(session, name)
            session.execute(delete(SessionJudge).where(SessionJudge.session_id == record.id,
                                                       SessionJudge.judge_id == judge.id))
        session.flush()
        names = list(session.scalars(select(Judge.name).join(SessionJudge, SessionJudge.judge_id == Judge.id)
                                     .where(SessionJudge.session_id == record.id).order_by(Judge.name)))
        return record.name, names
