"""The access log: one JSON line per request on stderr, written once per event-loop turn.

A line per request through ``logging`` (a record, a handler lock, a write and a flush) was a
large share of a request's cost on NB in an in-process timing; collecting the lines and writing
what a turn of the loop produced in one call costs far less. Lines are written before the loop handles anything else, so
the log trails the responses by one loop turn, and nothing is lost on a clean shutdown.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TextIO


class AccessLog:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._lines: list[str] = []

    def write(self, record: dict) -> None:
        if not self._lines:
            asyncio.get_running_loop().call_soon(self.flush)
        self._lines.append(json.dumps(record, ensure_ascii=False))

    def flush(self) -> None:
        if self._lines:
            stream = self.stream or sys.stderr
            stream.write("\n".join(self._lines) + "\n")
            stream.flush()
            self._lines.clear()
