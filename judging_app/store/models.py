"""The judging store's tables (SQLAlchemy 2 ORM).

- ``judges``: people who judge; a judge signs in with a secret token of which only a salted
  hash is stored (:mod:`qcat.judging.store.tokens`), found by its public ``token_id`` part.
- ``judging_sessions``: one blind side-by-side comparison of a baseline and a target model. Judges
  see only its ``display_name`` (or "Session ID" when it has none), never its name or models.
  ``kind``: ``results`` (judges grade listings of two search result lists, side by side) or
  ``categories`` (judges grade the categories one or two classifiers propose for a query, shown
  as one list in an order drawn per judge: :mod:`qcat.judging.grading.categories`).
- ``session_queries``: the session's queries, with their head/torso/tail segment, their order,
  which screen side the baseline is placed on (drawn per query with a seeded RNG) and how many
  judges currently hold or have finished them (``claims``, at most the session's
  ``judges_per_query`` except on gold questions, which every judge gets;
  :mod:`qcat.judging.grading.assignment` raises it with a conditional update).
- ``result_lists`` / ``result_items``: the two groups shown per query: which system, on which
  side, and the top listings with their positions (title, category, brand and price are copied
  in, so the app needs no catalog; brand and price are NULL when the catalog does not know them).
  In a category session a list is one model's top-k categories (``listing_id`` the category id,
  ``title`` and ``category`` its full path), and every judgment of it is stored on the left.
  ``result_items.answer`` says which of the model's answers a category is (:data:`ANSWERS`): one
  of its top k (``top``; every listing of a result session), or, in a session made with
  ``create-session --precision P``, its *node answer* at P (issue 52): ``top+node`` a top-k
  category that is also its node answer, ``leaf-node`` a leaf node answer not among its top k and
  ``inner-node`` a department, aisle or other inner node, both listed after its top k.
- ``assignments``: a query given to a judge (open, done or skipped; flagged with a note), or
  ``released``: an open claim given up because the judge was idle longer than the claim timeout
  or by ``qcat judge release`` (it no longer counts in ``claims``; the judge may still submit).
  ``active_at`` is when the judge last had the query shown or acted on it.
  Unique per (judge, query): a judge never gets a query twice.
- ``judgments``: a grade 0–3 of one listing on one side of one query by one judge. Unique per
  (judge, query, listing, side), enforced by the database: the judge's latest grade, which the
  report and exports use.
- ``judgment_history``: every grade ever submitted, with its time: a judge who edits a past
  judgment adds versions here; ``judgments`` keeps only the latest.
- ``judges.active``: a deactivated judge cannot sign in or get queries; their judgments stay.
- ``session_queries.extra_judges`` and ``query_reviews``: the admin page's disagreement queue.
  An admin sends a query back (one more judgment wanted: ``extra_judges`` + 1) or settles it
  (a grade of their own for each disputed listing, which the report uses instead of the judges'
  mean); every action is a row of ``query_reviews``, never changed afterwards.
- ``result_items.image_url`` / ``.link``: shown on the listing card when the lists carry them.
- ``admins``: organizers who sign in to the app's admin page with an admin token (hashed like a
  judge's, separate from judge tokens).
- ``sign_ins``: a browser's sign-in, kept across page reloads: the browser holds a random key in
  a session cookie; only its SHA-256 is stored. Revoking a token or deactivating a judge deletes
  their sign-ins.
- ``session_queries.gold`` and ``gold_grades``: gold questions, queries whose listings have known
  grades; every judge gets them, they are kept out of the session's results and the report
  compares each judge's grades with the known ones.

Every text column holds user text verbatim; the code only ever passes it as bound parameters.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

GRADE_NAMES = ("Off-topic", "Acceptable", "Good", "Excellent")
CATEGORY_GRADE_NAMES = ("Wrong", "Related", "Acceptable", "Exact")  # qcat.measure.judged.GRADE_NAMES
SESSION_KINDS = ("results", "categories")
SIDES = ("left", "right")
# What a result item is of its list's model's answers (result_items.answer): one of its top k, that
# and its node answer at the session's precision, or only its node answer (a leaf, or an inner node).
ANSWERS = ("top", "top+node", "leaf-node", "inner-node")
TOP_ANSWERS = ("top", "top+node")  # the model's ranked top k, in position order
NODE_ANSWERS = ("top+node", "leaf-node", "inner-node")  # the model's node answer (one per list at most)
SYSTEMS = ("baseline", "target")
ASSIGNMENT_STATES = ("open", "done", "skipped", "released")

# Deterministic constraint names, so Alembic migrations and the ORM agree on every database.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Judge(Base):
    __tablename__ = "judges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    token_id: Mapped[str] = mapped_column(String(32), unique=True)
    token_salt: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(128))
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Admin(Base):
    __tablename__ = "admins"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    token_id: Mapped[str] = mapped_column(String(32), unique=True)
    token_salt: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SignIn(Base):
    __tablename__ = "sign_ins"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the browser's key
    judge_id: Mapped[int | None] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), nullable=True, index=True)
    admin_id: Mapped[int | None] = mapped_column(ForeignKey("admins.id", ondelete="CASCADE"), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (CheckConstraint("(judge_id is null) <> (admin_id is null)", name="one_owner"),)


class JudgingSession(Base):
    __tablename__ = "judging_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(200), nullable=True)  # what judges see
    baseline_model: Mapped[str] = mapped_column(Text)
    target_model: Mapped[str] = mapped_column(Text)
    corpus: Mapped[str] = mapped_column(Text, default="")
    judges_per_query: Mapped[int] = mapped_column(Integer, default=3)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    settings: Mapped[str] = mapped_column(Text, default="{}")  # JSON: search config, requested sizes, timings
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    kind: Mapped[str] = mapped_column(String(16), default="results", server_default="results")  # see SESSION_KINDS

    __table_args__ = (CheckConstraint("judges_per_query >= 1", name="judges_per_query_positive"),)

    queries: Mapped[list["SessionQuery"]] = relationship(back_populates="session", order_by="SessionQuery.position")


class SessionQuery(Base):
    __tablename__ = "session_queries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("judging_sessions.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # order in the session, 0-based
    text: Mapped[str] = mapped_column(Text)  # the normalized query
    segment: Mapped[str] = mapped_column(String(16))
    impressions: Mapped[float] = mapped_column(Float, default=0.0)
    baseline_side: Mapped[str] = mapped_column(String(8))
    claims: Mapped[int] = mapped_column(Integer, default=0)
    gold: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    extra_judges: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # sent back by an admin

    __table_args__ = (
        UniqueConstraint("session_id", "text", name="uq_session_queries_session_text"),
        UniqueConstraint("session_id", "position", name="uq_session_queries_session_position"),
        CheckConstraint("baseline_side in ('left', 'right')", name="baseline_side"),
        CheckConstraint("claims >= 0", name="claims_non_negative"),
    )

    session: Mapped[JudgingSession] = relationship(back_populates="queries")
    lists: Mapped[list["ResultList"]] = relationship(back_populates="query", order_by="ResultList.side")


class ResultList(Base):
    __tablename__ = "result_lists"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("session_queries.id", ondelete="CASCADE"), index=True)
    system: Mapped[str] = mapped_column(String(16))  # baseline | target
    model: Mapped[str] = mapped_column(Text)  # the model directory
    side: Mapped[str] = mapped_column(String(8))  # left | right, as shown

    __table_args__ = (
        UniqueConstraint("query_id", "system", name="uq_result_lists_query_system"),
        UniqueConstraint("query_id", "side", name="uq_result_lists_query_side"),
        CheckConstraint("system in ('baseline', 'target')", name="system"),
        CheckConstraint("side in ('left', 'right')", name="side"),
    )

    query: Mapped[SessionQuery] = relationship(back_populates="lists")
    items: Mapped[list["ResultItem"]] = relationship(back_populates="result_list", order_by="ResultItem.position")


class ResultItem(Base):
    __tablename__ = "result_items"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    list_id: Mapped[int] = mapped_column(ForeignKey("result_lists.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # 1-based rank
    listing_id: Mapped[str] = mapped_column(String(200))
    title: Mapped[str] = mapped_column(Text, default="")
    category: Mapped[str] = mapped_column(Text, default="")  # the listing's category path
    brand: Mapped[str | None] = mapped_column(Text, nullable=True)  # None: not known
    price: Mapped[float | None] = mapped_column(Float, nullable=True)  # as in the catalog (no currency); None: not known
    image_url: Mapped[str | None] = mapped_column(Text, nullable=True)  # imported result lists only
    link: Mapped[str | None] = mapped_column(Text, nullable=True)
    answer: Mapped[str] = mapped_column(String(16), default="top", server_default="top")  # see ANSWERS

    __table_args__ = (
        UniqueConstraint("list_id", "position", name="uq_result_items_list_position"),
        UniqueConstraint("list_id", "listing_id", name="uq_result_items_list_listing"),
        CheckConstraint("position >= 1", name="position_positive"),
    )

    result_list: Mapped[ResultList] = relationship(back_populates="items")


class Assignment(Base):
    __tablename__ = "assignments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("session_queries.id", ondelete="CASCADE"), index=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("judging_sessions.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="open")
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    flag_note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    active_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)  # last shown or acted on
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # seconds the grading panel measured the judge at work on the query (idle gaps capped); see 0007
    active_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (
        UniqueConstraint("judge_id", "query_id", name="uq_assignments_judge_query"),
        CheckConstraint("status in ('open', 'done', 'skipped', 'released')", name="status"),
    )


class Judgment(Base):
    __tablename__ = "judgments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("session_queries.id", ondelete="CASCADE"), index=True)
    listing_id: Mapped[str] = mapped_column(String(200))
    side: Mapped[str] = mapped_column(String(8))  # left | right, as the judge saw it
    grade: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (
        UniqueConstraint("judge_id", "query_id", "listing_id", "side", name="uq_judgments_judge_query_listing_side"),
        CheckConstraint("grade >= 0 and grade <= 3", name="grade_range"),
        CheckConstraint("side in ('left', 'right')", name="side"),
    )


class JudgmentVersion(Base):
    __tablename__ = "judgment_history"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("session_queries.id", ondelete="CASCADE"), index=True)
    listing_id: Mapped[str] = mapped_column(String(200))
    side: Mapped[str] = mapped_column(String(8))
    grade: Mapped[int] = mapped_column(Integer)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (
        CheckConstraint("grade >= 0 and grade <= 3", name="grade_range"),
        CheckConstraint("side in ('left', 'right')", name="side"),
    )


class GoldGrade(Base):
    __tablename__ = "gold_grades"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("session_queries.id", ondelete="CASCADE"), index=True)
    listing_id: Mapped[str] = mapped_column(String(200))
    grade: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        UniqueConstraint("query_id", "listing_id", name="uq_gold_grades_query_listing"),
        CheckConstraint("grade >= 0 and grade <= 3", name="grade_range"),
    )


REVIEW_ACTIONS = ("sent_back", "settled")


class QueryReview(Base):
    __tablename__ = "query_reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("session_queries.id", ondelete="CASCADE"), index=True)
    admin_id: Mapped[int | None] = mapped_column(ForeignKey("admins.id", ondelete="SET NULL"), nullable=True)
    action: Mapped[str] = mapped_column(String(16))  # sent_back | settled
    listing_id: Mapped[str | None] = mapped_column(String(200), nullable=True)  # settled: the listing graded
    grade: Mapped[int | None] = mapped_column(Integer, nullable=True)  # settled: the admin's grade
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (
        CheckConstraint("action in ('sent_back', 'settled')", name="action"),
        CheckConstraint("grade is null or (grade >= 0 and grade <= 3)", name="grade_range"),
    )


class SessionJudge(Base):
    """A judge of a session that names its judges (``qcat judge members``); a session naming none
    is open to every judge."""

    __tablename__ = "session_judges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("judging_sessions.id", ondelete="CASCADE"), index=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"))

    __table_args__ = (UniqueConstraint("session_id", "judge_id", name="uq_session_judges_session_judge"),)
