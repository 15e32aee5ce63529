"""An organizer on the admin page while judges grade: the admin page's protocol, timed (benchmarks/
judging_protocol.py speaks it for the judges).

The admin signs in with an admin token (``qcat judge add-admin``) through the same form as a judge,
then reloads the page every ``every`` seconds, as an organizer pressing "Refresh" does (a
``rerun_script`` of the whole page). Each reload is timed from the message sent to Streamlit's
``script_finished``, and the page's tables (``st.dataframe``: Sessions, agreement, judges, claims,
disagreements, in page order) are read from their Arrow data, so that what the page showed can be
checked against the store.
"""

from __future__ import annotations

import asyncio
import time

import pyarrow as pa
from judging_protocol import Client


class Admin(Client):
    def __init__(self, address: str, token: str, every: float) -> None:
        super().__init__(address)
        self.token, self.every = token, every
        self.title = ""
        self.tables: list[list[dict]] = []  # the tables of the last run finished, in page order
        self.drawing: list[list[dict]] = []
        self.sent_at: float | None = None
        self.page_s: list[float] = []  # every timed reload: the message sent to the run finished

    def element(self, element, fragment: str) -> None:
        super().element(element, fragment)
        kind = element.WhichOneof("type")
        if kind == "heading" and element.heading.tag == "h1":
            self.title = element.heading.body
        elif kind == "dataframe":
            reader = pa.ipc.open_stream(element.dataframe.arrow_data.data)
            self.drawing.append(reader.read_all().to_pylist())

    def script_finished(self) -> None:
        if self.drawing:
            self.tables, self.drawing = self.drawing, []
        if self.sent_at is not None:
            self.page_s.append(time.perf_counter() - self.sent_at)
            self.sent_at = None

    async def sign_in(self) -> None:
        await super().sign_in(self.token, lambda: "admin" in self.title and bool(self.tables), "the admin")

    async def reload(self, wait_s: float = 60.0) -> float | None:
        """One reload of the whole page, timed; None when it took longer than ``wait_s``."""
        runs = self.runs
        self.drawing, self.sent_at = [], time.perf_counter()
        await self.rerun()
        if not await self.until(lambda: self.runs > runs, wait_s):
            return None
        return self.page_s[-1]

    async def watch(self, end: float) -> None:
        """Reload every ``every`` seconds until ``end``."""
        while time.perf_counter() < end:
            began = time.perf_counter()
            await self.reload()
            await asyncio.sleep(max(0.0, min(self.every - (time.perf_counter() - began), end - time.perf_counter())))

    def session_rows(self) -> list[dict]:
        """The Sessions table of the last reload (the page's first table)."""
        return self.tables[0] if self.tables else []
