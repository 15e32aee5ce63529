"""Judges without browsers: each speaks the grading panel's own protocol to a real `qcat judge app`.

The panel (judging_app/pages/panel*.js) is a Streamlit custom component; it talks to the server
through Streamlit's WebSocket, ``/_stcore/stream``, in protobuf messages from ``streamlit.proto``.
A protocol judge opens that WebSocket and sends what the browser sends:

* ``BackMsg.rerun_script`` (a ``ClientState``) with no widget state: the page load. The server
  answers with ``ForwardMsg``s: ``new_session`` (the page's script hash), ``delta``s (the sign-in
  form: a ``text_input`` and a form-submit ``button``, each with its widget id) and
  ``script_finished``.
* The sign-in: a ``rerun_script`` whose ``widget_states`` hold the token (``string_value`` of the
  text input) and ``trigger_value`` true for the submit button, as a form submit sends them.
* Each panel message: ``setStateValue('outbox', …)`` of panel_outbox.js's ``send`` is a
  ``rerun_script`` of the grading fragment (``fragment_id`` as the panel's delta carries it) whose
  ``widget_states`` hold the component's whole state as ``json_value``:
  ``{"outbox": {"actions": [...], "send": n, "holding": [query ids, the one on screen first],
  "want": k}}``. An Enter adds ``{"id", "kind": "submit", "query", "text", "grades": [[listing,
  side, 0-3], ...], "note": null, "seconds"}`` to the actions (panel_keys.js ``submit``).
* The answer is the panel's ``bidi_component`` delta, its ``json`` the panel's data: ``queue`` (the
  queries held, one already held sent as its id alone), ``answers`` (by action id), ``heard`` (the
  message answered), ``hold``/``hold_range``, ``mode``. A cacheable message the client said it
  holds (``cached_message_hashes``) comes as ``ref_hash``.
* The sidebar's "Your judgments" fragment asks for an ``auto_rerun`` every 15 s: sent, as the
  browser sends it (``is_auto_rerun``, that ``fragment_id``, every widget state).

What to send and when is the panel's own logic, :class:`judging_panel.Panel` (panel_desk.js,
panel_outbox.js). These messages were checked against those a real Chromium sends through the
panel. Not sent: the page's HTTP requests (HTML, scripts, /_stcore/health, host-config), static
and once a page.

A judge grades at ``pace`` queries a minute: the moment a query is on screen they read it (the
time a query takes, less their keys), type a grade per listing ``key_s`` apart, then Enter; they
never type ahead of a query they cannot see. ``loading_shown`` and ``transitions`` are the panel's
(:mod:`judging_panel`): an Enter after which no query was held ready, and the seconds from each
Enter to the next query held.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
import urllib.request

import websockets
from judging_panel import Panel
from qcat.judging.store.sign_ins import COOKIE
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

SIGN_IN_COOKIE = re.compile(re.escape(COOKIE) + r"=([^;\"]+)")


class Client:
    """One browser page: a WebSocket of its own to the app (``address``: host:port, the app's or a
    proxy's), the cookies a browser keeps (the proxy's route, the sign-in), the widget states it
    sends again with each rerun. When the connection drops (the app killed or restarted) it
    connects again to the same address every second, as Streamlit's page does, with its cookies
    and widget states: behind a proxy that lands on another app process."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.cookies: dict[str, str] = {}
        self.widgets: dict[str, tuple[str, object]] = {}  # widget id -> (WidgetState field, value), as sent
        self.page_hash = ""
        self.cache: dict[str, tuple[int, ForwardMsg]] = {}  # hash -> (script runs then, message): the browser's cache
        self.runs = 0
        self.autos: dict[str, asyncio.Task] = {}
        self.changed = asyncio.Event()
        self.auto_reruns = self.reconnects = self.dropped_sends = 0
        self.reconnect_s: list[float] = []
        self.closing = False
        self.sign_in_form: dict[str, str] = {}

    async def load_page(self) -> None:
        """The page's HTML, as a browser loads it first: a proxy's Set-Cookie (its route) is kept."""
        def get() -> list[str]:
            with urllib.request.urlopen(f"http://{self.address}/", timeout=30) as response:
                return response.headers.get_all("Set-Cookie") or []

        for header in await asyncio.to_thread(get):
            name, _, value = header.split(";", 1)[0].partition("=")
            self.cookies[name.strip()] = value.strip()

    async def connect(self) -> None:
        cookie = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        self.ws = await websockets.connect(f"ws://{self.address}/_stcore/stream", subprotocols=["streamlit"],
                                           max_size=None, additional_headers={"Cookie": cookie} if cookie else None)

    async def open(self) -> None:
        await self.load_page()
        await self.connect()
        self.tasks = [asyncio.create_task(self.read()), asyncio.create_task(self.ticks())]
        self.tasks[0].add_done_callback(lambda _: self.changed.set())  # a judge waiting hears of it at once

    async def close(self) -> None:
        self.closing = True
        for task in [*self.tasks, *self.autos.values()]:
            task.cancel()
        await self.ws.close()

    async def rerun(self, fragment: str = "", auto: bool = False) -> None:
        """``BackMsg.rerun_script``, as the browser's sendRerunBackMsg sends it: every widget state.
        Sent while the connection is down, it is lost, as in the browser."""
        back = BackMsg()
        state = back.rerun_script
        state.page_script_hash, state.fragment_id, state.is_auto_rerun = self.page_hash, fragment, auto
        state.cached_message_hashes.extend(self.cache)
        context = state.context_info
        context.timezone, context.timezone_offset, context.locale = "UTC", 0, "en-US"
        context.url, context.is_embedded, context.color_scheme = f"http://{self.address}/", False, "light"
        for widget_id, (field, value) in self.widgets.items():
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            setattr(widget, field, value)
        self.widgets = {k: v for k, v in self.widgets.items() if v[0] != "trigger_value"}  # a trigger goes once
        try:
            await self.ws.send(back.SerializeToString())
        except websockets.ConnectionClosed:
            self.dropped_sends += 1

    async def read(self) -> None:
        while True:
            try:
                async for raw in self.ws:
                    await self.forward(raw)
            except websockets.ConnectionClosed:
                pass
            if self.closing:
                return
            await self.reconnect()

    async def reconnect(self, every: float = 1.0, give_up_s: float = 120.0) -> None:
        lost = time.perf_counter()
        while True:
            await asyncio.sleep(every)
            try:
                await self.connect()
                break
            except (OSError, websockets.InvalidHandshake):
                if time.perf_counter() - lost > give_up_s:
                    raise
        self.reconnects += 1
        self.reconnect_s.append(time.perf_counter() - lost)
        await self.rerun()  # the page's run on the new connection, with every widget state

    async def forward(self, raw: bytes) -> None:
        message = ForwardMsg()
        message.ParseFromString(raw)
        kind = message.WhichOneof("type")
        if kind == "ref_hash":  # a message the browser said it holds
            message = self.cache[message.ref_hash][1]
            kind = message.WhichOneof("type")
        if message.metadata.cacheable:
            self.cache[message.hash] = (self.runs, message)
        if kind == "new_session":
            self.page_hash = message.new_session.page_script_hash
        elif kind == "script_finished":  # the cache keeps what the last 2 runs used (maxCachedMessageAge)
            self.runs += 1
            self.cache = {h: (run, m) for h, (run, m) in self.cache.items() if self.runs - run <= 2}
            self.script_finished()
        elif kind == "auto_rerun" and message.auto_rerun.fragment_id not in self.autos:
            fragment, every = message.auto_rerun.fragment_id, message.auto_rerun.interval
            self.autos[fragment] = asyncio.create_task(self.auto_rerun(fragment, every))
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            if element.WhichOneof("type") == "html" and (found := SIGN_IN_COOKIE.search(element.html.body)):
                self.cookies[COOKIE] = found.group(1)  # the page's script sets the sign-in cookie
            self.element(element, message.delta.fragment_id)
        await self.after_message()
        self.changed.set()

    def element(self, element, fragment: str) -> None:
        """The sign-in form's widgets (its token field and its submit button)."""
        kind = element.WhichOneof("type")
        if kind == "text_input":
            self.sign_in_form["token"] = element.text_input.id
        elif kind == "button" and element.button.is_form_submitter:
            self.sign_in_form["submit"] = element.button.id

    async def sign_in(self, token: str, signed_in, what: str) -> None:
        """The page load, then the sign-in form submitted with ``token``, until ``signed_in()``."""
        await self.rerun()
        if not await self.until(lambda: len(self.sign_in_form) == 2, 120):
            raise RuntimeError(f"{what}: no sign-in form")
        self.widgets = {self.sign_in_form["token"]: ("string_value", token),
                        self.sign_in_form["submit"]: ("trigger_value", True)}
        await self.rerun()
        if not await self.until(signed_in, 300):
            raise RuntimeError(f"{what}: nothing to do after signing in")
        for widget_id in self.sign_in_form.values():  # the sign-in form is gone from the page
            self.widgets.pop(widget_id, None)

    def script_finished(self) -> None:
        pass

    async def after_message(self) -> None:
        pass

    async def ticks(self) -> None:
        pass

    async def auto_rerun(self, fragment: str, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            await self.rerun(fragment, auto=True)
            self.auto_reruns += 1

    async def until(self, done, seconds: float) -> bool:
        deadline = time.perf_counter() + seconds
        while not done():
            if self.tasks[0].done():  # the connection could not be made again, or what the server sent could not be read
                self.tasks[0].result()
                raise RuntimeError(f"{self.address}: the app closed the connection")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.perf_counter()))
            except TimeoutError:
                return done()
        return True


class Judge(Client):
    """One judge: a page of their own, the panel's logic, a judge's rhythm."""

    def __init__(self, address: str, token: str, pace: float, key_s: float, seed: int) -> None:
        super().__init__(address)
        self.token, self.pace, self.key_s, self.seed = token, pace, key_s, seed
        self.rng = random.Random(seed)
        self.panel = Panel()
        self.panel_id = self.panel_fragment = ""
        self.typed: dict[int, dict[tuple[str, str], int]] = {}
        self.seconds = 0.0

    async def flush(self) -> None:
        """What the panel sends: setStateValue('outbox', value), a rerun of the panel's fragment."""
        while self.panel.outgoing:
            self.widgets[self.panel_id] = ("json_value", json.dumps({"outbox": self.panel.outgoing.pop(0)}))
            await self.rerun(self.panel_fragment)

    async def after_message(self) -> None:
        await self.flush()

    def element(self, element, fragment: str) -> None:
        super().element(element, fragment)
        if element.WhichOneof("type") == "bidi_component":
            for widget_id in self.sign_in_form.values():  # the sign-in form is gone from the page
                self.widgets.pop(widget_id, None)
            self.panel_id, self.panel_fragment = element.bidi_component.id, fragment
            self.panel.receive(json.loads(element.bidi_component.json))

    async def ticks(self) -> None:
        while True:
            await asyncio.sleep(1)
            if self.panel_id:
                self.panel.tick()
                await self.flush()

    async def sign_in(self) -> None:
        await super().sign_in(self.token, lambda: self.panel.current is not None, f"judge {self.seed}")

    async def grade(self, end: float) -> None:
        """Until ``end``: read the query on screen, type its grades, Enter; the first read is cut at
        random, so that the judges do not all press Enter together."""
        period, began = 60 / self.pace, time.perf_counter()
        while await self.until(lambda: self.panel.current is not None, end - time.perf_counter()):
            screen = self.panel.current
            keys = len(screen["slots"]) + 1
            think = self.rng.uniform(0, period) if not self.typed else max(0.0, period - keys * self.key_s)
            if time.perf_counter() + think + keys * self.key_s > end:
                break
            shown_at = time.perf_counter()
            await asyncio.sleep(think)
            q = len(self.typed)
            digits = [(self.seed + q + i * (1 + q % 3)) % 4 for i in range(len(screen["slots"]))]
            for _ in digits:
                self.panel.key(time.perf_counter())
                await self.flush()
                await asyncio.sleep(self.key_s)
            if self.panel.current is not screen:  # taken away while the judge typed
                continue
            self.typed[screen["id"]] = {(s["listing"], s["side"]): d for s, d in zip(screen["slots"], digits)}
            self.panel.submit(digits, time.perf_counter() - shown_at)
            await self.flush()
            await asyncio.sleep(self.key_s)
        self.seconds = time.perf_counter() - began

    def settled(self) -> bool:
        return not (self.panel.outbox or self.panel.failed or self.panel.sent_times or self.panel.send_pending)

    def result(self) -> dict:
        p = self.panel
        return {"typed": self.typed, "seconds": self.seconds, "transitions": p.transitions,
                "loading_shown": p.loading_shown, "statuses": p.statuses, "settled": self.settled(),
                "ran_out": p.data.get("mode") == "done", "panel_messages": p.sends, "auto_reruns": self.auto_reruns,
                "round_trips": p.round_trips, "reconnects": self.reconnects, "reconnect_s": self.reconnect_s,
                "dropped_sends": self.dropped_sends}
