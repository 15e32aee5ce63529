"""The report's plots, drawn with matplotlib (Agg) and returned as SVG text."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402

from qcat.evaluation.nodes import REPORTED  # noqa: E402
from qcat.evaluation.report import SEGMENT_ORDER, has_simulated, real_sets  # noqa: E402
from qcat.evaluation.scoring import CURVE_KS  # noqa: E402

matplotlib.rcParams["svg.hashsalt"] = "qcat"  # stable element ids: the same report gives the same SVG


def legend_label(name: str) -> str:
    """matplotlib hides legend labels that start with an underscore."""
    return " " + name if name.startswith("_") else name


def figure_svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    return buffer.getvalue()


def pr_at_k_by_segment(report: dict) -> str:
    panels = (list(SEGMENT_ORDER) if has_simulated(report) else []) + real_sets(report)
    figure, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3.2), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, segment in zip(axes, panels):
        for model in report["models"]:
            curve = model["pr_curves"][segment] if segment in SEGMENT_ORDER else model["query_sets"][segment]["PR@1 curve"]
            ax.plot(CURVE_KS, [100 * v for v in curve], marker="o", markersize=3, label=legend_label(model["name"]))
        ax.set_title(segment)
        ax.set_xlabel("k")
        ax.set_xticks(CURVE_KS)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("PR@k (%)")
    axes[-1].legend(loc="lower right", fontsize=8)
    return figure_svg(figure)


def pr_at_1_by_length(report: dict) -> str:
    bins = report["length_bins"]
    models = report["models"]
    figure, ax = plt.subplots(figsize=(6, 3.2))
    width = 0.8 / len(models)
    x = np.arange(len(bins))
    for i, model in enumerate(models):
        values = [model["by_length"][b]["PR@1"] for b in bins]
        ax.bar(x + i * width - 0.4 + width / 2, [100 * (v if v is not None else np.nan) for v in values], width,
               label=legend_label(model["name"]))
    ax.set_xticks(x, [f"{b}\n({models[0]['by_length'][b]['queries']:,})" for b in bins])
    ax.set_xlabel("query length in tokens (queries)")
    ax.set_ylabel("PR@1 (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return figure_svg(figure)


def reliability_diagram(report: dict) -> str:
    figure, ax = plt.subplots(figsize=(4.2, 4))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    for model in report["models"]:
        r = model["reliability"]
        points = [(s, a) for s, a in zip(r["mean_score"], r["accuracy"]) if s is not None]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", markersize=4,
                    label=f"{legend_label(model['name'])} (ECE {r['expected_calibration_error']:.3f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("top-1 score (bin mean)")
    ax.set_ylabel("top-1 is a clicked category")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return figure_svg(figure)


def node_precision_depth(report: dict) -> str:
    """Node answers from P = 0.50 to 0.99, a line per model and query set: measured precision
    against mean depth (left; P = 0.8, 0.9, 0.95 marked) and against the P promised (right)."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    right.plot([50, 100], [50, 100], color="grey", linestyle="--", linewidth=1, label="precision = P")
    for model in report["models"]:
        for qset, curve in (model.get("nodes") or {}).get("curves", {}).items():
            precision = np.array([np.nan if v is None else 100 * v for v in curve["precision"]])
            depth = np.array([np.nan if v is None else v for v in curve["mean_depth"]])
            (line,) = left.plot(depth, precision, linewidth=1.2, label=legend_label(f"{model['name']} · {qset}"))
            marked = [curve["P"].index(p) for p in REPORTED if p in curve["P"]]
            left.plot(depth[marked], precision[marked], linestyle="none", marker="o", markersize=4, color=line.get_color())
            right.plot([100 * p for p in curve["P"]], precision, linewidth=1.2, color=line.get_color())
    left.set_xlabel("mean depth (no node = 0; dots: P = " + ", ".join(f"{p:g}" for p in REPORTED) + ")")
    left.set_ylabel("node precision (%)")
    right.set_xlabel("P, the precision the bundle promises (%)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    handles = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0][:1]
    figure.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3)  # below: no curve hidden
    figure.tight_layout()
    return figure_svg(figure)


PLOTS = {
    "PR@k by segment": ("pr_at_k_by_segment.svg", pr_at_k_by_segment),
    "PR@1 by query length": ("pr_at_1_by_length.svg", pr_at_1_by_length),
    "Score reliability (top 1)": ("reliability.svg", reliability_diagram),
}


NODE_PLOT = "Node answers: precision against depth"


def draw_all(report: dict) -> dict[str, tuple[str, str]]:
    """Plot title -> (file name, SVG text); without the simulated split, only the PR@k curves; and
    the node answers' curve where a model has a node calibration."""
    plots = PLOTS if has_simulated(report) else dict(list(PLOTS.items())[:1])
    if any(model.get("nodes") for model in report["models"]):  # a model with a node calibration
        plots = plots | {NODE_PLOT: ("node_precision_depth.svg", node_precision_depth)}
    return {title: (file_name, draw(report)) for title, (file_name, draw) in plots.items()}
