"""A judging load run: protocol judges (benchmarks/judging_protocol.py) grade through one or more
`qcat judge app` processes, an organizer may reload the admin page meanwhile (judging_admin.py), one
process may be killed mid-run, and the server's work is measured.

The measures: the apps' CPU (utime + stime of each app's process tree, /proc/PID/stat), their
peak memory (VmHWM), this driver's own CPU (getrusage) and a PostgreSQL server's (its postmaster,
live and reaped backends), over the grading window: from the moment every judge is signed in to
the answers to their last actions (at most ``settle_s``, by default :data:`SETTLE_S`, after the minutes).
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
from collections.abc import Callable
from pathlib import Path

from judging_admin import Admin
from judging_protocol import Judge

SETTLE_S = 60.0  # after the window, how long a judge waits for the answers to their last actions


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it (``qcat judge app`` runs the Streamlit server as a child)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            pending += [int(child) for child in task.read_text().split()]
    return found


def cpu_seconds(pids: list[int], reaped: bool = False) -> float:
    """utime + stime of the processes (/proc/PID/stat), with ``reaped`` that of their children gone."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone since
            continue
        total += sum(int(f) for f in fields[11:15 if reaped else 13])
    return total / CLOCK_TICKS


def peak_memory_mb(pids: list[int]) -> float:
    """The largest peak resident size (VmHWM) among the processes."""
    peaks = [0]
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]))
    return round(max(peaks) / 1024, 1)


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def store_cpu_seconds(postmaster: int | None) -> float | None:
    """A PostgreSQL server's CPU: the postmaster with its live and reaped backends."""
    if postmaster is None:
        return None
    return cpu_seconds([postmaster], reaped=True) + cpu_seconds(process_tree(postmaster)[1:])


class ServerCpu:
    """The apps' CPU seconds since :meth:`start`; a process killed meanwhile counts up to its kill."""

    def __init__(self, app_pids: list[int]) -> None:
        self.trees = {pid: process_tree(pid) for pid in app_pids}
        self.start = {pid: cpu_seconds(tree) for pid, tree in self.trees.items()}
        self.gone: dict[int, float] = {}
        self.peaks: dict[int, float] = {}

    def kill(self, pid: int) -> None:
        self.gone[pid] = cpu_seconds(self.trees[pid]) - self.start[pid]
        self.peaks[pid] = peak_memory_mb(self.trees[pid])
        os.killpg(pid, signal.SIGKILL)

    def seconds(self) -> float:
        return sum(self.gone.get(pid, cpu_seconds(tree) - self.start[pid]) for pid, tree in self.trees.items())

    def peak_mb(self) -> float:
        return max(self.peaks[pid] if pid in self.peaks else peak_memory_mb(tree) for pid, tree in self.trees.items())


async def _drive(addresses: list[str], tokens: list[str], pace: float, minutes: float, key_s: float,
                 app_pids: list[int], postmaster: int | None, admin_token: str | None, admin_every: float,
                 kill: tuple[float, Callable[[], int]] | None, settle_s: float) -> tuple[list[Judge], Admin | None, dict]:
    judges = [Judge(addresses[i % len(addresses)], token, pace, key_s, i) for i, token in enumerate(tokens)]
    admin = Admin(addresses[0], admin_token, admin_every) if admin_token else None
    clients = [*judges, *([admin] if admin else [])]
    killed_at = None
    try:
        for client in clients:
            await client.open()
        await asyncio.gather(*(client.sign_in() for client in clients))
        cpu = ServerCpu(app_pids)
        before = (own_cpu_seconds(), store_cpu_seconds(postmaster), time.perf_counter())
        end = before[2] + minutes * 60
        tasks = [asyncio.create_task(judge.grade(end)) for judge in judges]
        if admin:
            tasks.append(asyncio.create_task(admin.watch(end)))
        if kill is not None:
            await asyncio.sleep(kill[0])
            cpu.kill(kill[1]())
            killed_at = time.perf_counter() - before[2]
        await asyncio.gather(*tasks)
        await asyncio.gather(*(judge.until(judge.settled, settle_s) for judge in judges))
        after = (own_cpu_seconds(), store_cpu_seconds(postmaster), time.perf_counter())
        usage = {"server_cpu_s": cpu.seconds(), "driver_cpu_s": after[0] - before[0],
                 "store_server_cpu_s": None if postmaster is None else after[1] - before[1],
                 "window_s": after[2] - before[2], "server_peak_memory_mb": cpu.peak_mb(), "killed_at_s": killed_at}
        if admin:
            await admin.reload()  # the admin page once every answer is in: its figures, checked by the caller
    finally:
        for client in clients:
            if hasattr(client, "ws"):
                await client.close()
    return judges, admin, usage


def drive(addresses: list[str], tokens: list[str], pace: float, minutes: float, key_s: float, app_pids: list[int],
          postmaster: int | None = None, admin_token: str | None = None, admin_every: float = 5.0,
          kill: tuple[float, Callable[[], int]] | None = None, settle_s: float = SETTLE_S) -> tuple[list[dict], dict]:
    """Every judge signs in (judge ``i`` at ``addresses[i % len(addresses)]``: apps or a proxy),
    then all grade for ``minutes``, each at ``pace`` queries a minute with keys ``key_s`` apart.
    With ``admin_token``, an organizer reloads the admin page every ``admin_every`` seconds
    meanwhile. With ``kill`` (seconds, a function giving an app's pid), that app is killed (SIGKILL,
    its process group) that long after the window opens; its judges connect again to their address. After the minutes each judge waits up to ``settle_s``
    for the answers to their last actions. What each judge typed
    and met (:meth:`Judge.result`), and the window's use (see the module's docstring), with the
    admin's reload times and the tables of the page once every answer was in."""
    judges, admin, usage = asyncio.run(_drive(addresses, tokens, pace, minutes, key_s, app_pids, postmaster,
                                              admin_token, admin_every, kill, settle_s))
    if admin is not None:
        usage |= {"admin_page_s": admin.page_s[:-1], "admin_final_page_s": admin.page_s[-1:],
                  "admin_tables": admin.tables, "admin_reconnects": admin.reconnects}
    return [judge.result() for judge in judges], usage
