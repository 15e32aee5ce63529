"""The grading panel's logic, in Python, for the protocol judges (benchmarks/judging_protocol.py).

A twin of what judging_app/pages/panel_desk.js, panel_outbox.js and panel_keys.js do while a judge
grades (not the review mode, skips, flags or drawing): the queries held (the one on screen first),
the outbox of actions not answered yet, one message at a time (what comes meanwhile waits and goes
with the answer), a message unanswered for 3 s sent again, how many queries to hold from the
judge's pace and the round trips of late, and the answer's queue taken as the panel takes it.
Each message is a state value in ``outgoing``, for the caller to send as the panel's
``setStateValue('outbox', value)``.

``loading_shown`` counts as the panel does (``showNext``): an Enter after which no query was held
ready, so that the panel would show "Loading the next query…" and the judge waited for the
server. ``transitions``: seconds from each Enter to the next query held (about 0 when one was;
the panel also counts the next frame drawn).
"""

from __future__ import annotations

import html
import itertools
import math
import secrets
import time

RESEND_S, DONE_ASK_S, MARGIN, FIRST_TRIP_S = 3.0, 30.0, 2, 2.0  # panel_outbox.js


def recent(values: list[float], value: float, keep: int = 8) -> None:
    values.append(value)
    del values[:-keep]


class Panel:
    """The grading panel's state and logic (panel_desk.js, panel_outbox.js, panel_keys.js) for one
    judge grading: ``outgoing`` collects the state values to send, in order."""

    def __init__(self) -> None:
        self.data: dict = {}
        self.epoch = None
        self.screens: dict[int, dict] = {}
        self.order: list[int] = []  # the queries held, the one on screen first
        self.current: dict | None = None
        self.finished_here: set[int] = set()
        self.outbox: list[dict] = []
        self.failed: list[dict] = []
        self.sends = 0
        self.sent_at = self.retried_at = -1e9
        self.sent_times: dict[int, float] = {}
        self.sent_on_screen: dict[int, int | None] = {}
        self.hellos: set[int] = set()
        self.send_pending = False
        self.paces: list[float] = []
        self.trips: list[float] = []
        self.round_trips: list[float] = []  # every message's, to its answer (the hellos' excepted): the benchmark's
        self.key_times: list[float] = []
        self.last_done_at: float | None = None
        self.pressed_at: float | None = None
        self.dry = False
        self.transitions: list[float] = []
        self.loading_shown = 0
        self.statuses: dict[str, int] = {}
        self.outgoing: list[dict] = []
        self.ids = itertools.count()

    def hold_wanted(self) -> int:
        least, most = self.data.get("hold_range") or (1, 1)
        if not self.paces:
            return least
        pace = sorted(self.paces)[len(self.paces) // 2]
        trip = max(self.trips) if self.trips else FIRST_TRIP_S
        return max(least, min(most, math.ceil(2 * trip / max(pace, 0.001)) + MARGIN))

    def send(self, hello: bool = False) -> None:
        now = time.perf_counter()
        if self.sent_times and now - self.sent_at < RESEND_S:
            self.send_pending = True
            return
        self.send_pending = False
        self.sent_at = now
        self.sends += 1
        self.sent_times[self.sends] = now
        self.sent_on_screen[self.sends] = self.order[0] if self.order else None
        if hello:
            self.hellos.add(self.sends)
        self.outgoing.append({"actions": list(self.outbox), "send": self.sends, "holding": list(self.order),
                              "want": int(self.hold_wanted())})

    def tick(self) -> None:
        """panel.js's timer, once a second: an unanswered message goes again; with nothing left, ask."""
        since = time.perf_counter() - self.sent_at
        due = ((self.outbox or self.failed or self.send_pending or self.sent_times or self.data.get("store_down"))
               and since > RESEND_S) or (self.data.get("mode") == "done" and since > DONE_ASK_S)
        if due:
            self.send()

    def key(self, at: float) -> None:
        """A grade key (panel_keys.js firstKeys): before the first Enter, the pace guessed from the keys."""
        if self.paces or self.current is None:
            return
        self.key_times.append(at)
        if len(self.key_times) == 3:
            recent(self.paces, (self.key_times[2] - self.key_times[0]) / 2 * (len(self.current["slots"]) + 1))
            if len(self.order) < self.hold_wanted() - 1:
                self.send()

    def submit(self, digits: list[int], seconds: float) -> None:
        """Enter on the query on screen, every listing graded (panel_keys.js submit, then leave)."""
        at = time.perf_counter()
        if self.last_done_at is not None:
            recent(self.paces, at - self.last_done_at)
        self.last_done_at = at
        screen = self.current
        self.outbox.append({"id": f"{time.time_ns():x}-{next(self.ids):x}-{secrets.token_hex(3)}", "kind": "submit",
                            "query": screen["id"], "text": screen["plain"], "note": None, "seconds": round(seconds, 3),
                            "grades": [[slot["listing"], slot["side"], d] for slot, d in zip(screen["slots"], digits)]})
        self.send()
        self.finished_here.add(screen["id"])
        self.order = [q for q in self.order if q != screen["id"]]
        self.pressed_at = at
        self.show_next()

    def show_next(self) -> None:
        shown = next((q for q in self.order if q not in self.finished_here), None)
        self.current = self.screens.get(shown) if shown is not None else None
        if self.current is None and self.pressed_at is not None and self.data.get("mode") == "grade" and not self.dry:
            self.loading_shown += 1
        self.dry = self.current is None
        if self.current is not None:
            if self.last_done_at is None:
                self.last_done_at = time.perf_counter()
            if self.pressed_at is not None:
                self.transitions.append(time.perf_counter() - self.pressed_at)
                self.pressed_at = None

    def receive(self, data: dict) -> None:
        """The server's answer (panel_desk.js receive), grading only."""
        fresh = self.epoch != data.get("epoch")
        self.data = data
        if fresh:
            self.epoch = data.get("epoch")
            self.screens, self.order, self.current, self.finished_here = {}, [], None, set()
            self.finished_here |= {action["query"] for action in self.outbox + self.failed}
            if self.outbox:
                self.send()
        heard = data.get("heard") if isinstance(data.get("heard"), int) else None
        if heard is not None:
            sent = self.sent_times.get(heard)
            if sent is not None and heard not in self.hellos:
                recent(self.trips, time.perf_counter() - sent)
                self.round_trips.append(self.trips[-1])
            self.sent_times = {n: t for n, t in self.sent_times.items() if n > heard}
        answers = data.get("answers") or {}
        for action in [a for a in self.outbox if a["id"] in answers]:
            status = answers[action["id"]]["status"]
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == "store_down":
                self.failed.append(action)
        self.outbox = [a for a in self.outbox if a["id"] not in answers]
        unasked = heard is None
        keep_held = unasked and not fresh and bool(self.order)
        if unasked:
            self.sent_times.clear()
        offered = data.get("queue") or []
        queue = [] if keep_held else [s for s in offered if s["id"] not in self.finished_here
                                      and ("slots" in s or s["id"] in self.screens)]
        for screen in queue:
            if "slots" in screen:
                self.screens[screen["id"]] = {**screen, "plain": html.unescape(screen["text"])}
        ids = [q for q in self.order if q not in self.finished_here] if keep_held else [s["id"] for s in queue]
        if not keep_held:
            listed = {s["id"] for s in offered}
            self.finished_here = {q for q in self.finished_here if q in listed
                                  or any(a["query"] == q for a in self.outbox)}
        shown = self.current
        basis = self.sent_on_screen.get(heard) if heard is not None else None
        if heard is not None:
            self.sent_on_screen = {n: q for n, q in self.sent_on_screen.items() if n >= heard}
        stale = bool(shown) and shown["id"] not in ids and not fresh and basis is not None and basis != shown["id"]
        if stale:
            ids.insert(0, shown["id"])
        if shown and shown["id"] not in ids and not data.get("store_down"):
            self.statuses["taken_away"] = self.statuses.get("taken_away", 0) + 1
        self.order = ids
        if not shown or shown["id"] not in ids:
            self.show_next()
        if self.failed and not data.get("store_down") and time.perf_counter() - self.retried_at > RESEND_S:
            self.retried_at = time.perf_counter()  # panel_messages.js retry: sent again under new ids
            self.outbox += [{**a, "id": f"{a['id'].split('~')[0]}~{next(self.ids):x}"} for a in self.failed]
            self.failed = []
            self.send()
        elif unasked and data.get("mode") == "grade" and not self.sent_times:
            self.send(hello=True)
        elif (self.send_pending or stale) and not self.sent_times:
            self.send()
        elif (data.get("mode") == "grade" and not data.get("store_down") and not self.sent_times and not self.failed
              and len(self.order) < self.hold_wanted() - 1 and len(offered) >= (data.get("hold") or float("inf"))):
            self.send()  # refill: fewer held than the judge gets through in a round trip


