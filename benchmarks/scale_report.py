"""The scale benchmark's results (benchmarks/bench_scale.py): merged into one JSON file per (stage,
size, engine), each stage's time and memory fitted as ``a * rows ** b``, printed as a table and
plotted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scale_log import size_name


def load_results(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"runs": {}}


def save_results(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=True))
    tmp.replace(path)


def fit_exponent(rows: list[int], values: list[float]) -> tuple[float, float] | None:
    """(a, b) of value = a * rows ** b, least squares in log-log; None under two points."""
    points = [(r, v) for r, v in zip(rows, values) if v and v > 0]
    if len({r for r, _ in points}) < 2:
        return None
    x = np.log([r for r, _ in points])
    y = np.log([v for _, v in points])
    b, log_a = np.polyfit(x, y, 1)
    return float(math.exp(log_a)), float(b)


def series(results: dict) -> dict[str, list[tuple[int, dict]]]:
    out: dict[str, list[tuple[int, dict]]] = {}
    for key, run in results["runs"].items():
        stage = key.rsplit("@", 1)[0]
        if run.get("rc") == 0:
            out.setdefault(stage, []).append((run["rows"], run))
    return {stage: sorted(points, key=lambda p: p[0]) for stage, points in sorted(out.items())}


def print_table(results: dict) -> str:
    data = series(results)
    sizes = sorted({rows for points in data.values() for rows, _ in points})
    header = "| stage | " + " | ".join(f"{size_name(s)} rows" for s in sizes) + " | time exponent b | memory exponent b |"
    lines = [header, "|" + "---|" * (len(sizes) + 3)]
    for stage, points in data.items():
        by_size = dict(points)
        cells = []
        for s in sizes:
            run = by_size.get(s)
            cells.append(f"{run['seconds']:,.1f} s, {run['peak_gb']:.2f} GB" if run else "-")
        t = fit_exponent([r for r, _ in points], [p["seconds"] for _, p in points])
        m = fit_exponent([r for r, _ in points], [p["peak_gb"] for _, p in points])
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {t[1]:.2f} |" if t else f"| {stage} | "
                     + " | ".join(cells) + " | - |")
        lines[-1] += f" {m[1]:.2f} |" if m else " - |"
    text = "\n".join(lines)
    print(text)
    return text


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for stage, points in data.items():
        rows = [r for r, _ in points]
        for axis, field in ((left, "seconds"), (right, "peak_gb")):
            values = [p[field] for _, p in points]
            fit = fit_exponent(rows, values)
            label = f"{stage} (b={fit[1]:.2f})" if fit else stage
            axis.plot(rows, values, marker="o", label=label)
    for axis, title in ((left, "wall time (s)"), (right, "peak RSS (GB)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("click-log rows")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    fig.suptitle("qcat pipeline at scale (2 cores, shared machine)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    print(f"plotted {path}")
