"""The server side of the grading panel (:mod:`qcat.judging.pages.panel`): what one judge's panel sends,
stored, and what it is sent back. No Streamlit here: the app calls it once per panel message, and
the tests call it directly against a real store.

The panel sends its *outbox*: every action the judge took that the server has not yet answered
(submit, skip, flag & skip, a reviewed query's changed grades), each with an id of the panel's
own. :meth:`GradingDesk.take` stores each action once (an action already answered gets its first
answer again: a message sent twice, or re-sent after a reload, stores nothing twice) and answers
it: ``saved``, ``skipped``, ``changed`` or ``finished`` (done elsewhere; nothing changed) end it;
``not_needed`` (late grades no longer needed: nothing recorded) and ``refused`` end it with a
message; ``store_down`` keeps it in the panel, with the grades, for the judge to send again.
:meth:`GradingDesk.queue` then gives the query to show and the ones to hold ready after it.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from qcat.errors import InputError
from qcat.judging.grading import assignment, judgments, screens
from qcat.judging.grading.imports import safe_url
from qcat.judging.grading.screens import QueryScreen, Shown
from qcat.judging.store.connection import Store, error_detail
from qcat.judging.store.models import CATEGORY_GRADE_NAMES, GRADE_NAMES

PREFETCH = 4  # queries held ready after the one on screen, at least: a margin for a busy server
MAX_HOLD = 12  # queries a panel may hold at most, the one on screen included (it asks from the judge's pace)
PROGRESS_SECONDS = 15.0  # the session's counts on the panel: read again at most this often (a scan of the session)
MAX_ACTIONS = 200  # an outbox longer than this is not the panel's
RELEASE_EVERY = 10.0  # seconds: a desk releases the session's idle claims at most this often (a scan per pick cost CPU)
STORE_DOWN = "The judging store cannot be reached right now"


@dataclass
class Answer:
    """The server's answer to one action of the panel."""

    status: str  # saved, skipped, changed, finished, not_needed, refused, store_down, back
    message: str
    query_id: int | None = None

    def as_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "query_id": self.query_id}


def price_text(price: float) -> str:
    """A catalog price as shown (the catalog names no currency): 49.88, 1,299.00."""
    return f"{price:,.2f}"


def card(item: Shown) -> dict:
    """One listing as the panel draws it: every text escaped here (the panel inserts it as HTML),
    only http(s) and inline-image URLs."""
    image = safe_url(item.image_url or "", images=True)
    link = safe_url(item.link or "", images=False)
    facts = [f"Brand: {item.brand}" if item.brand else "",
             f"Price: {price_text(item.price)}" if item.price is not None else ""]
    return {"listing": html.escape(item.listing_id), "position": item.position,
            "title": html.escape(item.title) or "(no title)",
            "facts": html.escape(" · ".join(fact for fact in facts if fact)),
            "category": html.escape(item.category),
            "image": html.escape(image, quote=True) if image else None,
            "link": html.escape(link, quote=True) if link else None}


def screen_data(screen: QueryScreen, grades: dict[tuple[str, str], int] | None = None) -> dict:
    """A query as the panel draws it: both groups, and the listings to grade in the order the keys
    go (Group A top to bottom, then Group B's listings not shown in Group A). A listing in both
    groups is graded once, in Group A. Never which system is which. A category session's query
    is one group of categories (``kind``), graded with :data:`CATEGORY_GRADE_NAMES`."""
    shared = screen.shared()
    left_position = {item.listing_id: item.position for item in screen.left}
    groups = {"left": [], "right": []}
    slots = []
    for side, group in (("left", screen.left), ("right", screen.right)):
        for item in group:
            shown = card(item)
            if side == "right" and item.listing_id in shared:
                shown["same_as"] = left_position[item.listing_id]
            else:
                shown["slot"] = len(slots)
                slots.append({"listing": item.listing_id, "side": side,
                              "grade": (grades or {}).get((item.listing_id, side))})
            groups[side].append(shown)
    names = CATEGORY_GRADE_NAMES if screen.kind == "categories" else GRADE_NAMES
    return {"id": screen.query_id, "text": html.escape(screen.text), "left": groups["left"], "right": groups["right"],
            "slots": slots, "kind": screen.kind, "grade_names": list(names)}


@dataclass
class GradingDesk:
    """One judge's grading in one session, as the panel drives it."""

    store: Store
    judge_id: int
    session_id: int
    claim_timeout: timedelta = assignment.CLAIM_TIMEOUT
    prefetch: int = PREFETCH
    answered: dict[str, dict] = field(default_factory=dict)  # action id -> its answer (kept by the app per page)
    finished: set[int] = field(default_factory=set)  # queries this page has acted on: never shown again by it
    drawn: dict[int, dict] = field(default_factory=dict)  # query id -> screen_data (a query's lists never change)
    shown: dict[int, QueryScreen] = field(default_factory=dict)  # query id -> its screen, for the submit's checks
    counted: tuple[float, dict] | None = None  # (when, progress)
    acted: bool = False  # an action of the judge was stored since the counts were read
    released_at: float = -math.inf  # when this desk last released the session's idle claims (monotonic)
    log: Any = None

    def take(self, outbox: object) -> dict[str, dict]:
        """Store every action of the outbox not answered yet, in order; the answers of all of them."""
        actions = outbox if isinstance(outbox, list) else []
        answers: dict[str, dict] = {}
        self.new_answers: list[dict] = []  # those answered by this call (a page rerun sends old ones again)
        for action in actions[:MAX_ACTIONS]:
            if not isinstance(action, dict) or not isinstance(action.get("id"), str):
                continue
            key = action["id"][:100]
            if key not in self.answered:  # a retry after the store was down comes with an id of its own
                answer = self.answered[key] = self.answer(action).as_dict()
                self.new_answers.append(answer)
                if answer["status"] in ("saved", "skipped", "finished", "not_needed", "refused"):
                    self.finished.add(answer["query_id"])
                if answer["status"] in ("saved", "skipped"):
                    self.acted = True
                if answer["status"] == "refused" and action.get("kind") in ("submit", "skip", "flag"):
                    self.let_go(answer["query_id"])
            answers[key] = self.answered[key]
        for key in set(self.answered) - set(answers):  # the panel has let go of them
            del self.answered[key]
        return answers

    def answer(self, action: dict) -> Answer:
        try:
            return self._answer(action)
        except SQLAlchemyError as exc:
            if self.log is not None:
                self.log.error("judging store error: %s", error_detail(exc), exc_info=exc)
            query_id = action.get("query")
            return Answer("store_down", f"Not saved: {STORE_DOWN.lower()}. Your grades are kept here: press R "
                                        "(or Retry) in a moment.", query_id if isinstance(query_id, int) else None)

    def _answer(self, action: dict) -> Answer:
        kind, query_id = action.get("kind"), action.get("query")
        if kind == "back":  # the judge leaves a query under review: nothing to store
            return Answer("back", "", query_id if isinstance(query_id, int) else None)
        if not isinstance(query_id, int) or isinstance(query_id, bool):
            return Answer("refused", "the panel sent an action without its query: reload the page", None)
        text = str(action.get("text", ""))[:200]
        note = action.get("note") or None
        if note is not None and not isinstance(note, str):
            return Answer("refused", "a flag note must be text", query_id)
        try:
            if kind in ("submit", "review"):
                result = judgments.submit(self.store, self.judge_id, query_id, self.grades(action), flag_note=note,
                                          resubmit=kind == "review", shown=self.shown.get(query_id),
                                          active_seconds=action.get("seconds") if kind == "submit" else None)
                if kind == "review":
                    changed = result.listings_updated
                    return Answer("changed", f"Changed {changed} grade{'s' * (changed != 1)} of “{text}”." if changed
                                  else f"No grade of “{text}” changed.", query_id)
                return Answer("saved", f"Saved your {len(action['grades'])} grades for “{text}”.", query_id)
            if kind in ("skip", "flag"):
                if kind == "flag" and not (note or "").strip():
                    return Answer("refused", "Write what is wrong with the query in the note, then flag it.", query_id)
                assignment.skip(self.store, self.judge_id, query_id, flag_note=note)
                return Answer("skipped", f"{'Flagged and skipped' if kind == 'flag' else 'Skipped'} “{text}”.", query_id)
            return Answer("refused", f"unknown action {str(kind)[:20]!r}: reload the page", query_id)
        except assignment.AlreadyFinished as exc:
            if kind == "submit" and exc.status == "done" and self.stored_as_sent(query_id, action):
                return Answer("saved", f"Your grades for “{text}” were saved already.", query_id)  # a retry, a reload
            if kind == "submit" and exc.status == "done":
                return Answer("finished", f"Your grades for “{text}” were not stored: you graded it in another window "
                                          "already (those grades are kept).", query_id)
            if kind in ("skip", "flag") and exc.status == "skipped":  # the same: skipped once already
                return Answer("skipped", f"“{text}” was skipped already.", query_id)
            return Answer("finished", f"“{text}” was already {'graded' if exc.status == 'done' else 'skipped'} in "
                                      "another window: nothing was changed.", query_id)
        except judgments.NotNeeded:
            return Answer("not_needed", f"While “{text}” waited, other judges graded it: your grades for it are not "
                                        "needed and nothing was recorded.", query_id)
        except InputError as exc:
            return Answer("refused", str(exc), query_id)

    def stored_as_sent(self, query_id: int, action: dict) -> bool:
        """Whether the judge's stored grades of the query are those of ``action``: the same
        submission sent again, not other grades from another window."""
        stored = judgments.my_grades(self.store, self.judge_id, query_id)
        return all(stored.get((listing, side)) == grade for listing, side, grade in self.grades(action))

    def let_go(self, query_id: int | None) -> None:
        """Give back the judge's claim on a query the panel has let go of (its action refused)."""
        if query_id is None:
            return
        try:
            assignment.release(self.store, judge_id=self.judge_id, query_id=query_id)
        except (InputError, SQLAlchemyError) as exc:  # it expires with the claim timeout all the same
            if self.log is not None:
                self.log.warning("could not release query %s of judge %s: %s", query_id, self.judge_id, exc)

    @staticmethod
    def grades(action: dict) -> list[tuple[str, str, object]]:
        rows = action.get("grades")
        if not isinstance(rows, list) or not all(isinstance(row, list) and len(row) == 3 for row in rows):
            raise InputError("the panel sent grades in a shape it never sends: reload the page")
        return [(str(listing), str(side), grade) for listing, side, grade in rows]

    def hold(self, want: object = None) -> int:
        """How many queries the panel gets (the one on screen included): as many as it wants (from
        its judge's pace: a fast judge on a slow server needs more), from 1 + ``prefetch`` to
        :data:`MAX_HOLD`."""
        wanted = want if isinstance(want, int) and not isinstance(want, bool) else 0
        return max(self.hold_range()[0], min(wanted, self.hold_range()[1]))

    def hold_range(self) -> tuple[int, int]:
        """The fewest and the most queries :meth:`hold` gives a panel."""
        return 1 + self.prefetch, max(1 + self.prefetch, MAX_HOLD)

    def queue(self, holding: object = (), want: object = None, elsewhere: Collection[int] = ()) -> list[dict]:
        """The query to show and the ones held ready after it (claimed for this judge), :meth:`hold`
        of them, or as many as the panel holds (``holding``) if that is more: an answer never drops a
        held query that is still the judge's to fit a smaller ``want``. A query the panel holds already (``holding``) is sent as its id alone: the panel
        has the rest. ``elsewhere``: queries the judge's other windows hold (:mod:`.windows`), never
        given to this one."""
        skip = self.finished | set(elsewhere)
        held = [q for q in holding if isinstance(q, int) and not isinstance(q, bool) and q not in skip
                ][:MAX_HOLD] if isinstance(holding, list) else []
        # Never fewer than the panel holds: by the time this answer lands the judge may be on any of
        # them (a fast judge wants fewer after a quick first answer, and this one may come late).
        count = max(self.hold(want), len(held))
        shown: dict[int, QueryScreen] = {}

        def draw(session, ids: list[int]) -> None:  # in the pick's transaction: one round trip less
            shown.update({query_id: screens.screen(session, query_id, self.judge_id)
                          for query_id in ids if query_id not in self.drawn})

        release_idle = time.monotonic() - self.released_at >= RELEASE_EVERY
        ids = assignment.next_queries(self.store, self.judge_id, self.session_id, count, self.claim_timeout,
                                      holding=held, passed_over=skip, release_idle=release_idle, then=draw)
        if release_idle:
            self.released_at = time.monotonic()
        self.shown.update(shown)
        self.drawn.update({query_id: screen_data(screen) for query_id, screen in shown.items()})
        for query_id in set(self.drawn) - set(ids):
            del self.drawn[query_id]
            self.shown.pop(query_id, None)
        return [{"id": query_id} if query_id in held else self.drawn[query_id] for query_id in ids]

    def review(self, query_id: int) -> list[dict]:
        """A query this judge submitted, with their grades, to change."""
        with self.store.sessions() as session:
            shown = screens.screen(session, query_id, self.judge_id)
        return [screen_data(shown, judgments.my_grades(self.store, self.judge_id, query_id))]

    def progress(self, max_age: float = PROGRESS_SECONDS) -> dict:
        """The judge's and the session's counts, read again at most every ``max_age`` seconds
        (counting a large session's judgments on every message would cost more than the rest); the
        judge's own counts also as soon as one of their actions was stored."""
        now = time.monotonic()
        if self.counted is None or now - self.counted[0] >= max_age:
            p = assignment.progress(self.store, self.judge_id, self.session_id)
            self.counted = (now, {"judged": p["judged"], "skipped": p["skipped"], "done": p["judgments_done"],
                                  "needed": p["judgments_needed"], "complete": p["complete_queries"],
                                  "queries": p["queries"]})
        elif self.acted:  # "You: N judged" counts a submit at once; the session's counts wait their turn
            self.counted = (self.counted[0], {**self.counted[1], **assignment.judge_progress(
                self.store, self.judge_id, self.session_id)})
        self.acted = False
        return self.counted[1]
