"""The evaluation report's tables and its Markdown form.

A report is the dict :func:`evaluation.evaluate.evaluate` returns. :func:`tables` turns
it into plain tables (title, header, rows of strings) that both the Markdown and the
HTML renderers print, so the two always show the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SEGMENT_ORDER = ("all", "head", "torso", "tail")
DELTA_SEGMENTS = ("head", "torso", "tail", "all")  # eBay Table 4 lists head, torso, tail


def main_columns(k: int) -> tuple[str, ...]:
    return ("P", "R", "F1", "PR@1", "PR@3", "PR@10", f"nDCG@{k}", f"PSP@{k}", f"coverage@{k}")


def extra_columns(k: int) -> tuple[str, ...]:
    return ("P@1", "P@3", "P@5", f"PSP@{k} raw", f"PSnDCG@{k}", f"PSnDCG@{k} raw", f"WP@{k}", f"WP-regret@{k}",
            f"Tau@{k}", f"XMAD@{k}", f"XRMSE@{k}", "MAD", "ECE")


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    note: str = ""
    detail: bool = False  # printed after the plots


def percent(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.2f}"


def number(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def signed(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:+.2f}"


def tables(report: dict) -> list[Table]:
    k = report["options"]["k"]
    models = report["models"]
    columns = main_columns(k)
    out = []
    for segment in SEGMENT_ORDER:
        n = report["segments"].get(segment) if segment != "all" else report["source"]["queries"]
        out.append(Table(
            f"{segment} queries ({n:,})",
            ("model",) + tuple(f"{c} (%)" for c in columns),
            [(m["name"],) + tuple(percent(m["segments"][segment][c]) for c in columns) for m in models],
        ))
    if len(models) > 1:
        base = models[0]
        rows = []
        for m in models[1:]:
            for i, segment in enumerate(DELTA_SEGMENTS):
                deltas = tuple(signed(m["segments"][segment][c] - base["segments"][segment][c]) for c in columns)
                rows.append((f"{m['name']} − {base['name']}" if i == 0 else "", segment) + deltas)
        out.append(Table(
            f"Differences against {base['name']} (percentage points, laid out like eBay's Table 4)",
            ("models", "QSet") + tuple(f"δ {c}" for c in columns),
            rows,
        ))
    extras = extra_columns(k)
    out.append(Table(
        "All queries: ranking, propensity-scored and regression metrics",
        ("model",) + extras,
        [(m["name"],) + tuple(number(m["segments"]["all"][c]) for c in extras) for m in models],
        note=(f"PSP@{k} and PSnDCG@{k} are normalized by the best attainable value (as papers report them); "
              "the 'raw' columns are Jain et al.'s unbiased estimators, which can exceed 1. "
              "WP, WP-regret, Tau, XMAD, XRMSE and MAD compare scores with each query's click shares; "
              "ECE is the expected calibration error of the top-1 score."),
        detail=True,
    ))
    bins = report["length_bins"]
    out.append(Table(
        "PR@1 (%) by query length (tokens)",
        ("model",) + tuple(f"{b} ({models[0]['by_length'][b]['queries']:,})" for b in bins),
        [(m["name"],) + tuple(percent(m["by_length"][b]["PR@1"]) for b in bins) for m in models],
        detail=True,
    ))
    return out


def header_lines(report: dict) -> list[str]:
    source = report["source"]
    p = report["propensity"]
    options = report["options"]
    return [
        f"Corpus {source['corpus']}, period {source['period']}, split {source['split']}: "
        f"{source['queries']:,} queries (head {report['segments']['head']:,}, torso {report['segments']['torso']:,}, "
        f"tail {report['segments']['tail']:,} by 30/30/40% of impressions).",
        f"Each model's top {options['prediction_k']} per query; P/R/F1 use the categories scoring at least "
        f"{options['threshold']:g} (at least the top one).",
        f"Propensities: A = {p['A']:.3f}, B = {p['B']:.3f} ({'fitted' if p['fitted'] else 'Jain et al. defaults'}), "
        f"N = {p['N']:,} training queries.",
        "Models: " + "; ".join(f"{m['name']} ({m['backend']}, {m['directory']})" for m in report["models"]) + ".",
        f"Created {report['created']}.",
    ]


def markdown_table(table: Table) -> str:
    lines = [f"### {table.title}", "", "| " + " | ".join(table.header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.header))) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return "\n".join(lines)


def render_markdown(report: dict, plot_files: dict[str, str]) -> str:
    """The report as Markdown; ``plot_files`` maps a plot's title to its (relative) file."""
    return markdown_document("qcat evaluation report", header_lines(report), tables(report), plot_files)


def markdown_document(title: str, header: list[str], sections: list[Table], plot_files: dict[str, str]) -> str:
    """Header bullets, the main tables, the plots, then the detail tables."""
    parts = [f"# {title}", "", *[f"- {line}" for line in header], ""]
    parts += [markdown_table(t) + "\n" for t in sections if not t.detail]
    parts += ["## Plots", ""] + [f"![{name}]({path})\n" for name, path in plot_files.items()]
    parts += [markdown_table(t) + "\n" for t in sections if t.detail]
    return "\n".join(parts)
