"""`qcat serve` under load: latency and throughput against the model's own in-process cost,
and a soak run with reloads under load.

Each configuration starts `qcat serve` (a separate process, 127.0.0.1, a free port) and drives
it from this process with the keep-alive load generator of benchmarks/serve_load.py. Every level
is bounded in requests and seconds. For each configuration it prints:
- the in-process cost, measured in the same run: `Classifier.classify_each` of one query (p50),
  and per query in batches of 100 — the limit the service is measured against;
- single-query GET requests at 1, 8 and 64 concurrent clients: p50/p95/p99 latency, requests/s;
- 100-query POST batches from 8 clients: queries/s;
- the HTTP overhead: p50 at 1 client minus the in-process p50 of one query.

Run: python benchmarks/bench_serve.py [--seconds 6] [--requests 20000]
     python benchmarks/bench_serve.py --soak 600    (reloads every 3 s under 8 clients, 2 workers)
     python benchmarks/bench_serve.py --reload-memory 100   (RSS over 100 reloads, 1 and 2 workers)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from serve_load import REPO, ServerProcess, drive, get_request, post_request, run

DEMO = REPO / "demo" / "qcat_demo" / "model"
SINGLE_LEVELS = (1, 8, 64)
BATCH_SIZE = 100
BATCH_CLIENTS = 8  # the kernel spreads connections over workers by hash: 8 leave none idle (4: 1 in 8 runs would)
CONFIGS = [  # (name, model, qcat serve flags, levels)
    ("demo model (hybrid: NB + XReg blend), 1 worker", DEMO, [], ("single", "batch")),
    ("demo model, 1 worker, micro-batching off", DEMO, ["--no-micro-batch"], ("single", "batch")),
    ("demo model, 2 workers", DEMO, ["--workers", "2"], ("single", "batch")),
    ("NB alone (the demo's nb/ part), 1 worker", DEMO / "nb", [], ("single", "batch")),
]


def sample_queries(n: int = 5000) -> list[str]:
    """Distinct queries of the demo corpus's test split (head, torso and tail), shuffled."""
    from qcat.training.data.corpus import Corpus

    queries = list(dict.fromkeys(Corpus.open().dataset("base").test.queries))
    order = np.random.default_rng(0).permutation(len(queries))[:n]
    return [queries[i] for i in order]


def in_process_cost(model: Path, queries: list[str]) -> tuple[float, float]:
    """(p50 ms of one query, µs per query in batches of 100) of the model in this process."""
    from qcat.classifier import Classifier

    classifier = Classifier.load(model).compile()  # as the service loads it: single queries take the compiled path
    classifier.classify_each(queries[:200], 5)
    single = []
    for query in queries[:2000]:
        started = time.perf_counter()
        classifier.classify_each([query], 5)
        single.append(time.perf_counter() - started)
    started = time.perf_counter()
    for i in range(0, 2000, BATCH_SIZE):
        classifier.classify_each(queries[i:i + BATCH_SIZE], 5)
    return 1000 * statistics.median(single), 1e6 * (time.perf_counter() - started) / 2000


def level(port: int, requests: list[bytes], clients: int, max_requests: int, seconds: float):
    run(drive(port, requests, clients, min(200, max_requests), 2.0))  # warm up
    return run(drive(port, requests, clients, max_requests, seconds))


def bench(name: str, model: Path, flags: list[str], levels, queries: list[str], args) -> None:
    single_ms, batched_us = in_process_cost(model, queries)
    print(f"\n### {name}\n`qcat serve --model {model.relative_to(REPO)} {' '.join(flags)}`\n")
    print(f"in-process: one query p50 {single_ms:.3f} ms; batches of {BATCH_SIZE}: {batched_us:.0f} µs/query "
          f"= {1e6 / batched_us:,.0f} queries/s\n")
    server = ServerProcess(["--model", str(model), *flags])
    try:
        if "single" in levels:
            singles = [get_request(q) for q in queries]
            print("| clients | requests | failed | p50 ms | p95 ms | p99 ms | requests/s |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for clients in SINGLE_LEVELS:
                r = level(server.port, singles, clients, args.requests, args.seconds)
                print(f"| {clients} | {r.requests:,} | {r.failures} | {r.percentile(50):.2f} | {r.percentile(95):.2f} | "
                      f"{r.percentile(99):.2f} | {r.per_second:,.0f} |")
                if clients == 1:
                    overhead = r.percentile(50) - single_ms
            print(f"\nHTTP overhead at 1 client: {overhead:.3f} ms per request above the in-process p50")
        if "batch" in levels:
            batches = [post_request("/v1/classify", {"queries": queries[i:i + BATCH_SIZE], "k": 5})
                       for i in range(0, len(queries) - BATCH_SIZE + 1, BATCH_SIZE)]
            r = level(server.port, batches, BATCH_CLIENTS, max(1, args.requests // 25), args.seconds)
            print(f"batches of {BATCH_SIZE} from {BATCH_CLIENTS} clients: {r.requests:,} requests, {r.failures} failed, "
                  f"p50 {r.percentile(50):.1f} ms, **{r.per_second * BATCH_SIZE:,.0f} queries/s**")
        print(f"server RSS {server.rss_mib():.0f} MiB")
    finally:
        server.stop()


def tampered_copy(source: Path, target: Path) -> Path:
    """A copy of ``source`` with one byte of one listed file changed (verification must refuse it)."""
    shutil.copytree(source, target)
    victim = next(p for p in sorted(target.iterdir()) if p.suffix == ".npz")
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    return target


async def reload_once(port: int, request: bytes) -> tuple[int, str | None]:
    """(status, the bundle hash a 200 names) of one reload request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    body = await reader.readexactly(int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1)))
    writer.close()
    status = int(head[9:12])
    return status, json.loads(body)["model"]["bundle_hash"] if status == 200 else None


def wrong_bundle_answers(answers: list, start_hash: str, reloads: list) -> int:
    """Answers from a bundle other than the one the last acknowledged reload named: between a
    reload's answer and the next reload's request, every request sent must be answered by the
    bundle that reload named (a refused reload names the one still served)."""
    expected, windows, opened = start_hash, [], float("-inf")
    for sent, acknowledged, status, bundle in reloads:
        windows.append((opened, sent, expected))
        if status == 200:
            expected = bundle
        opened = acknowledged
    windows.append((opened, float("inf"), expected))
    wrong = 0
    for sent, bundle in answers:
        for low, high, expected in windows:
            if low < sent < high and bundle != expected:
                wrong += 1
    return wrong


def soak(seconds: float, reload_every: float = 3.0, clients: int = 8, queries: list[str] | None = None,
         workers: int = 1) -> dict:
    """``clients`` single-query clients for ``seconds`` while the model directory (a symlink) is
    repointed every ``reload_every`` s in the cycle NB part, tampered copy, demo, and reloaded
    over HTTP. Returns the counts, the reload outcomes, the answers from a bundle other than the
    last acknowledged one and the server's memory samples."""
    queries = queries or ["king poster bed", "dior gaudron", "usb c cable", "lego", "nintendo switch controller"]
    token = "soak-token"
    with tempfile.TemporaryDirectory(prefix="qcat-soak-") as tmp:
        tmp = Path(tmp)
        targets = [DEMO / "nb", tampered_copy(DEMO / "nb", tmp / "tampered"), DEMO]
        link = tmp / "current"
        link.symlink_to(DEMO)
        server = ServerProcess(["--model", str(link), "--no-access-log", "--workers", str(workers)],
                               env={"QCAT_RELOAD_TOKEN": token})
        reload_request = post_request("/v1/reload", {}, {"Authorization": f"Bearer {token}"})
        reloads, memory = [], []  # reloads: (sent, answered, status, bundle hash)

        async def reloader(load: asyncio.Task) -> None:
            step = 0
            while not load.done():
                await asyncio.sleep(reload_every)
                if load.done():
                    break
                staged = tmp / "staged"
                staged.symlink_to(targets[step % len(targets)])
                os.replace(staged, link)  # an atomic repoint, as a deploy would do it
                sent = time.perf_counter()
                status, bundle = await reload_once(server.port, reload_request)
                reloads.append((sent, time.perf_counter(), status, bundle))
                memory.append(server.rss_mib())
                step += 1

        async def main():
            load = asyncio.create_task(drive(server.port, [get_request(q) for q in queries], clients, 10**9, seconds,
                                             record_bundles=True))
            await reloader(load)
            return await load

        try:
            start_hash = hashlib.sha256((DEMO / "manifest.json").read_bytes()).hexdigest()
            result = run(main())
        finally:
            code = server.stop()
    # Memory differs with the model being served, so compare like with like: the peak of the
    # second half of the run against the peak of the first half, after one warm-up cycle.
    warm = memory[len(targets):]
    half = len(warm) // 2
    growth = max(warm[half:]) / max(warm[:half]) - 1 if half else float("nan")
    return {"requests": result.requests, "statuses": result.statuses, "failures": result.failures,
            "bundles_seen": len(result.bundles), "reloads": [status for _, _, status, _ in reloads],
            "wrong_bundle": wrong_bundle_answers(result.answers, start_hash, reloads),
            "memory_mib": memory, "memory_growth": growth, "p99_ms": result.percentile(99), "exit_code": code}


def reload_memory(reloads: int, workers: int) -> list[float]:
    """The service's RSS (all its processes, MiB) at start and after every 10 reloads of the demo
    model over HTTP, with no traffic."""
    token = "memory-token"
    server = ServerProcess(["--model", str(DEMO), "--no-access-log", "--workers", str(workers)],
                           env={"QCAT_RELOAD_TOKEN": token})
    request = post_request("/v1/reload", {}, {"Authorization": f"Bearer {token}"})
    try:
        samples = [server.rss_mib()]
        for i in range(1, reloads + 1):
            status, _ = run(reload_once(server.port, request))
            assert status == 200, f"reload {i} answered {status}"
            if i % 10 == 0:
                samples.append(server.rss_mib())
    finally:
        server.stop()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="longest time per load level (default 6)")
    parser.add_argument("--requests", type=int, default=20000, help="most requests per load level (default 20000)")
    parser.add_argument("--only", default=None, metavar="TEXT", help="only the configurations whose name holds TEXT")
    parser.add_argument("--soak", type=float, default=None, metavar="SECONDS",
                        help="instead: the soak run, reloading every 3 s under 8 clients")
    parser.add_argument("--soak-workers", type=int, default=2, help="workers of the soak run (default 2)")
    parser.add_argument("--reload-memory", type=int, default=None, metavar="N",
                        help="instead: RSS over N reloads of the demo model, with 1 and with 2 workers")
    args = parser.parse_args()
    print(f"bench_serve: {os.cpu_count()} CPUs, shared by the server and the load generator; "
          f"load average at the start {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.reload_memory:
        for workers in (1, 2):
            samples = reload_memory(args.reload_memory, workers)
            print(f"{workers} worker(s): RSS (MiB) at start and after every 10 reloads: "
                  f"{[round(m) for m in samples]}; the last vs the one after 10 reloads: "
                  f"{100 * (samples[-1] / samples[1] - 1):+.1f}%")
        return
    if args.soak:
        started = time.perf_counter()
        report = soak(args.soak, workers=args.soak_workers)
        print(f"soak {args.soak:g} s, {args.soak_workers} worker(s) ({time.perf_counter() - started:.0f} s wall): "
              f"{report['requests']:,} requests, statuses {report['statuses']}, {report['failures']} failed, "
              f"p99 {report['p99_ms']:.1f} ms")
        print(f"reloads (status per attempt): {report['reloads']}; bundles seen in answers: {report['bundles_seen']}; "
              f"answers from a bundle other than the last acknowledged reload's: {report['wrong_bundle']}")
        print(f"server RSS per reload (MiB): {[round(m) for m in report['memory_mib']]}; "
              f"peak, second half vs first half after a warm-up cycle: {100 * report['memory_growth']:+.1f}%; "
              f"exit code {report['exit_code']}")
        return
    queries = sample_queries()
    for name, model, flags, levels in CONFIGS:
        if args.only and args.only not in name:
            continue
        bench(name, model, flags, levels, queries, args)
    print(f"load average at the end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
