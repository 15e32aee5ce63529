"""The nginx proxy of the guide (docs/guide/judging-team.md), run in front of several `qcat judge app`
processes: the configuration is read from the guide itself, so that what the guide tells an
organizer to run is what the benchmark and the two-process test run.

The guide's block goes into nginx's ``http`` context as is; only its ``listen`` port and its
``server`` lines (one per app, with the guide's options) are changed. nginx runs in the
foreground under a prefix folder of its own (its pid, logs and temporary files there).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide" / "judging-team.md"
UPSTREAM = re.compile(r"^(\s*)server 127\.0\.0\.1:\d+( [^;]*)?;\n", re.MULTILINE)


def guide_config() -> str:
    """The guide's first ```nginx block."""
    found = re.search(r"```nginx\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)
    if found is None:
        raise ValueError(f"{GUIDE}: no ```nginx block")
    return found.group(1)


def configured(listen: int, app_ports: list[int]) -> str:
    """The guide's block listening on ``listen``, in front of the apps on ``app_ports``."""
    block = guide_config()
    servers = list(UPSTREAM.finditer(block))
    if not servers or "listen 8500;" not in block:
        raise ValueError(f"{GUIDE}: the nginx block has no `listen 8500;` or no `server 127.0.0.1:PORT` line")
    indent, options = servers[0].group(1), servers[0].group(2) or ""
    lines = "".join(f"{indent}server 127.0.0.1:{port}{options};\n" for port in app_ports)
    block = block[:servers[0].start()] + lines + UPSTREAM.sub("", block[servers[0].start():])
    return block.replace("listen 8500;", f"listen 127.0.0.1:{listen};")


class Nginx:
    """nginx with the guide's configuration on ``listen``, in front of ``app_ports``."""

    def __init__(self, listen: int, app_ports: list[int], folder: Path) -> None:
        binary = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
        if binary is None:
            raise FileNotFoundError("no nginx: install Debian's nginx (apt-get install nginx)")
        self.port, self.folder = listen, folder / "nginx"
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        conf = self.folder / "nginx.conf"
        conf.write_text(f"worker_processes 1;\npid {self.folder}/nginx.pid;\nerror_log {self.folder}/logs/error.log;\n"
                        f"events {{ worker_connections 4096; }}\nhttp {{\naccess_log {self.folder}/logs/access.log;\n"
                        f"{configured(listen, app_ports)}}}\n")
        self.process = subprocess.Popen([binary, "-p", str(self.folder), "-c", str(conf), "-g", "daemon off;"],
                                        stdout=subprocess.DEVNULL, stderr=(self.folder / "logs" / "stderr.log").open("w"))
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{listen}/_stcore/health", timeout=2):
                    return
            except OSError as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {(self.folder / 'logs' / 'stderr.log').read_text()}"
                                       f"{(self.folder / 'logs' / 'error.log').read_text()}") from exc
                time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
