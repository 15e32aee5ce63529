"""bench_real_text.py's output: the figures table, strict/lenient/severe top-1 with their standard
errors, each model's paired difference from the baseline, and those differences pooled over the
real-text sets of a saved run (``--pooled``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PAIRED = {"sim": "sim-test", "real-title": "real-title", "real-2tok": "real-2tok"}
OUTCOMES = ("strict", "lenient", "severe")  # top-1 strict (= PR@1), lenient and severe, paired too
COLUMNS = ("sim PR@1", "sim head PR@1", "sim torso PR@1", "sim tail PR@1",
           "real-title PR@1", "real-title PR@3", "real-2tok PR@1", "real-2tok PR@3",
           "real-queries PR@1", "real-queries PR@3", "train s", "predict ms/q")
# Strict top-1 is PR@1; lenient credits an answer confusable with the gold; severe: another department.
ERROR_COLUMNS = tuple(f"{s} {kind}" for s in ("sim", "real-title", "real-2tok") for kind in OUTCOMES)


def cell(column: str, value) -> str:
    if value is None:
        return "–"
    if column == "train s":
        return f"{value:.1f}"
    return f"{value:.3f}"


def markdown_table(results: dict[str, dict]) -> str:
    lines = ["| model | " + " | ".join(COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
    lines += [f"| {name} | " + " | ".join(cell(c, row.get(c)) for c in COLUMNS) + " |" for name, row in results.items()]
    return "\n".join(lines)


def mean_se(values: np.ndarray) -> tuple[float, float]:
    values = values[~np.isnan(values)]
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def paired_rows(per_query: dict[str, dict], baseline: str) -> dict[str, dict]:
    """Each model's PR@1/PR@3 and strict/lenient/severe top-1 minus the baseline's per set, and the
    paired standard error."""
    rows = {}
    base = per_query[baseline]
    for name, sets in per_query.items():
        row = {}
        for short, set_name in PAIRED.items():
            for key in (1, 3, *OUTCOMES):
                if key in sets[set_name] and key in base[set_name]:
                    label = f"{short} PR@{key}" if isinstance(key, int) else f"{short} {key}"
                    row[label] = mean_se(sets[set_name][key] - base[set_name][key])
        rows[name] = row
    return rows


def error_table(per_query: dict[str, dict]) -> str:
    """Strict, lenient and severe top-1 of every model on the paired sets, each ± its standard error."""
    columns = [(short, set_name, kind) for short, set_name in PAIRED.items() for kind in OUTCOMES]
    lines = ["| model | " + " | ".join(f"{short} {kind}" for short, _, kind in columns) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for name, sets in per_query.items():
        cells = []
        for _, set_name, kind in columns:
            cells.append("–" if kind not in sets[set_name] else "{:.4f} ± {:.4f}".format(*mean_se(sets[set_name][kind])))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_table(rows: dict[str, dict], baseline: str) -> str:
    columns = [c for c in (f"{short} {key}" if key in OUTCOMES else f"{short} PR@{key}"
                           for short in PAIRED for key in (1, 3, *OUTCOMES)) if any(c in row for row in rows.values())]
    lines = [f"| vs {baseline} (difference ± paired SE) | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    lines += [f"| {name} | " + " | ".join(f"{row[c][0]:+.4f} ± {row[c][1]:.4f}" if c in row else "–" for c in columns)
              + " |" for name, row in rows.items()]
    return "\n".join(lines)


POOLED = ("real-title", "real-2tok")


def pooled_rows(saved: dict) -> dict[str, dict]:
    """Each model's paired difference from the baseline pooled over the real-text test sets (the sets'
    differences weighted by their sizes; the sets are independent samples, so their variances add)."""
    sizes = {name: saved["sets"][name] for name in POOLED}
    total = sum(sizes.values())
    rows = {}
    for model, row in saved["paired"]["rows"].items():
        rows[model] = {}
        for kind in OUTCOMES:
            cells = [row.get(f"{name} {kind}") for name in POOLED]
            if None in cells:
                continue
            mean = sum(sizes[name] * cell[0] for name, cell in zip(POOLED, cells)) / total
            se = float(np.sqrt(sum((sizes[name] * cell[1]) ** 2 for name, cell in zip(POOLED, cells)))) / total
            rows[model][kind] = (mean, se)
    return rows


def print_pooled(path: str) -> None:
    saved = json.loads(Path(path).read_text())
    print(f"| vs {saved['paired']['baseline']}, pooled over {' + '.join(POOLED)} (difference ± paired SE) | "
          + " | ".join(OUTCOMES) + " |")
    print("|" + "---|" * (len(OUTCOMES) + 1))
    for model, row in pooled_rows(saved).items():
        print(f"| {model} | " + " | ".join(f"{row[k][0]:+.4f} ± {row[k][1]:.4f}" if k in row else "–" for k in OUTCOMES)
              + " |")
