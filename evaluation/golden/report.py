"""The golden harness report: tables (Markdown and HTML share them) and plots."""

from __future__ import annotations

import math

import numpy as np

from qcat.evaluation.golden.system_metrics import METRICS, PR_AT_K
from qcat.evaluation.html import html_document
from qcat.evaluation.plots import figure_svg, legend_label, plt
from qcat.evaluation.report import Table, markdown_document, percent
from qcat.training.data.provenance import format_overlap

TITLE = "qcat golden-data search evaluation"


def interval(entry: dict) -> str:
    delta, low, high = entry["delta"], entry["low"], entry["high"]
    if delta is None or math.isnan(delta):
        return "–"
    if low is None or math.isnan(low):
        return f"{100 * delta:+.2f}"
    return f"{100 * delta:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}]"


def metrics_of(report: dict) -> tuple[str, ...]:
    """The metrics the report holds (PR@k too when a system answered by node)."""
    return tuple(report["options"].get("metrics", METRICS))


def label(report: dict, metric: str) -> str:
    return f"PR@{report['search']['top_n']}" if metric == PR_AT_K else metric


def node_systems(report: dict) -> list[dict]:
    """The systems that answered by node at a precision (none without the precision flags)."""
    return [system for system in report["systems"] if "node" in system]


def segments_of(report: dict) -> list[str]:
    """The query sets that hold queries, in report order (head, torso, tail, no demand, all)."""
    return list(report["systems"][0]["segments"])


def tables(report: dict) -> list[Table]:
    out = []
    metrics = metrics_of(report)
    for segment in segments_of(report):
        n = report["systems"][0]["segments"][segment]["queries"]
        rows = []
        for system in report["systems"]:
            figures = system["segments"][segment]
            rows.append((system["name"], *(percent(figures[m]) for m in metrics), f"{figures['mean_returned']:.2f}",
                         percent(figures["zero_result_share"]), percent(figures["judged_share"])))
        out.append(Table(f"{segment} queries ({n:,})",
                         ("system", *(f"{label(report, m)} (%)" for m in metrics), "returned", "no result (%)",
                          "judged (%)"), rows))
    if node_systems(report):
        out.append(node_table(report))
    rows = []
    previous = None
    for entry in report["deltas"]:
        pair = f"{entry['target']} − {entry['baseline']}"
        rows.append((pair if pair != previous else "", entry["segment"], *(interval(entry[m]) for m in metrics)))
        previous = pair
    out.append(Table(
        "Differences (percentage points, laid out like eBay's Table 4)",
        ("models", "QSet", *(f"δ {label(report, m)}" for m in metrics)),
        rows,
        note=(f"Brackets: {report['options']['bootstrap']:,}-draw paired bootstrap 95% intervals over queries. "
              "Per query, a judged listing counts as predicted relevant when it is among the returned top "
              f"{report['search']['top_n']}; accuracy, precision, recall and F1 are then averaged over the queries "
              "where they are defined. NDCG* counts an unjudged returned listing as Off-topic; 'judged' is the share "
              "of returned listings that the golden set judges."),
    ))
    return out


def node_table(report: dict) -> Table:
    rows = []
    for system in node_systems(report):
        for segment, figures in system["node"]["segments"].items():
            depth = figures["mean_depth"]
            rows.append((system["name"], f"{system['node']['precision']:g}", segment, f"{figures['queries']:,}",
                         "–" if depth is None or math.isnan(depth) else f"{depth:.2f}", percent(figures["no_node_share"]),
                         percent(figures["unsupported_share"]), percent(figures["leaf_share"])))
    return Table("Node answers", ("system", "precision", "QSet", "queries", "mean depth", "no node (%)",
                                  "unsupported (%)", "leaf (%)"), rows,
                 note="Mean depth over the queries with a node (1: a department). No node: the query was searched "
                      "as without a classifier; unsupported: of those, the ones whose length the node calibration "
                      "cannot support the precision for. Leaf: answered by a leaf, as a top-leaf answer would be.")


def node_line(report: dict) -> str:
    """Which side answered by node at which P, and what the others did."""
    search = report["search"]
    acts = (f"the listings beneath its node boosted by {search['boost_weight']:g} × the node's probability"
            if search["mode"] == "boost" else "only the listings beneath its node kept")
    by_node = "; ".join(f"{s['name']} answers each query by its node at precision {s['node']['precision']:g} ({acts}; "
                        f"a query without a node is searched as without a classifier)" for s in node_systems(report))
    by_leaf = [s["name"] for s in report["systems"][1:] if "node" not in s]
    leaves = (f"{' and '.join(by_leaf)} by {'its' if len(by_leaf) == 1 else 'their'} top categories (leaves) as above"
              if by_leaf else "")
    return f"Node answers: {by_node}" + (f"; {leaves}" if leaves else "") + f". PR@{search['top_n']} added."


def header_lines(report: dict) -> list[str]:
    golden, inventory, search = report["golden"], report["inventory"], report["search"]
    sets = report["query_sets"]
    lines = [
        f"Golden data: {golden['source']}: {golden['judgments']:,} judgments of {golden['pairs']:,} (query, listing) "
        f"pairs over {golden['queries']:,} queries" + (" (SIMULATED by the demo's ground truth, not human judges)"
                                                        if golden["simulated"] else "") + ".",
        f"Inventory: {inventory['listings']:,} listings = {inventory['golden_listings']:,} judged + "
        f"{inventory['sampled_listings']:,} sampled from the catalog ({100 * inventory['sample_fraction']:g}%); "
        f"{inventory['unsearchable_golden_listings']:,} judged listings are unsearchable (not in the catalog, no text).",
    ]
    if inventory["golden_listings"] == 0:
        lines.append("WARNING: no judged listing is in the catalog, so no system can return one: every figure below "
                     "measures unjudged results only (the listings need titles in the catalog to be searchable).")
    if report["demand"]:
        available = sets.get("available", {})
        lines.append(f"Query sets from the demand of {report['demand']} by 30/30/40% of impressions, at most "
                     f"{report['options']['per_segment']:,} each: " + ", ".join(
                         f"{s} {n:,} of {available.get(s, n):,}" for s, n in sets["sampled"].items() if available.get(s, n))
                     + " (no demand: golden queries the log never saw).")
    else:
        lines.append(f"No demand data: one query set of {sets['sampled']['all']:,} golden queries.")
    mode = (f"boost (BM25 / best BM25 + {search['boost_weight']:g} × category score)" if search["mode"] == "boost"
            else f"filter (classifier's top {search['categories']} categories)")
    lines.append(f"Search: BM25 (bm25s) over titles, top {search['candidates']} candidates, classifier mode {mode}, "
                 f"top {search['top_n']} returned.")
    lines.append("Systems: " + "; ".join(f"{s['name']} ({s['backend']}" + (f", {s['directory']})" if s["directory"] else ")")
                                         for s in report["systems"]) + ".")
    if node_systems(report):
        lines.append(node_line(report))
    lines += [f"{s['name']}: {format_overlap(s['overlap']['all'])} (the classifier's training queries; a query it "
              f"trained on is not a held-out test of it)" for s in report["systems"] if "overlap" in s]
    lines.append(f"Took {report['seconds']['total']:.1f} s. Created {report['created']}.")
    return lines


def metrics_by_segment(report: dict) -> str:
    segments = segments_of(report)
    figure, axes = plt.subplots(1, len(segments), figsize=(3.4 * len(segments), 3.2), sharey=True, squeeze=False)
    width = 0.8 / len(report["systems"])
    metrics = metrics_of(report)
    x = np.arange(len(metrics))
    for ax, segment in zip(axes[0], segments):
        for i, system in enumerate(report["systems"]):
            values = [system["segments"][segment][m] for m in metrics]
            ax.bar(x + i * width - 0.4 + width / 2, [100 * (v if v is not None else np.nan) for v in values], width,
                   label=legend_label(system["name"]))
        ax.set_title(segment)
        ax.set_xticks(x, [label(report, m) for m in metrics], rotation=45, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("%")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    return figure_svg(figure)


def target_deltas(report: dict) -> str:
    first = report["deltas"][0]
    entries = [e for e in report["deltas"] if (e["target"], e["baseline"]) == (first["target"], first["baseline"])]
    figure, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / len(entries)
    metrics = metrics_of(report)
    x = np.arange(len(metrics))
    for i, entry in enumerate(entries):
        delta = np.array([100 * _none_to_nan(entry[m]["delta"]) for m in metrics])
        low = np.array([100 * _none_to_nan(entry[m]["low"]) for m in metrics])
        high = np.array([100 * _none_to_nan(entry[m]["high"]) for m in metrics])
        errors = np.vstack([np.nan_to_num(delta - low), np.nan_to_num(high - delta)])
        ax.bar(x + i * width - 0.4 + width / 2, delta, width, yerr=errors, capsize=2, label=entry["segment"])
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(x, [label(report, m) for m in metrics])
    ax.set_ylabel(f"δ (points), {first['target']} − {first['baseline']}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return figure_svg(figure)


def _none_to_nan(value) -> float:
    return float("nan") if value is None else float(value)


def draw_all(report: dict) -> dict[str, tuple[str, str]]:
    return {
        "Metrics by segment": ("metrics_by_segment.svg", metrics_by_segment(report)),
        "Target − baseline with 95% intervals": ("target_deltas.svg", target_deltas(report)),
    }


def render_markdown(report: dict, plot_files: dict[str, str]) -> str:
    return markdown_document(TITLE, header_lines(report), tables(report), plot_files)


def render_html(report: dict, plots: dict[str, tuple[str, str]]) -> str:
    return html_document(TITLE, header_lines(report), tables(report), plots)
