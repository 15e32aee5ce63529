"""The evaluation report's tables and its Markdown form.

A report is the dict :func:`qcat.evaluation.evaluate.evaluate` returns. :func:`tables` turns
it into plain tables (title, header, rows of strings) that both the Markdown and the
HTML renderers print, so the two always show the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from qcat.evaluation.nodes import node_tables
from qcat.evaluation.scoring import unseen_table

SEGMENT_ORDER = ("all", "head", "torso", "tail")
DELTA_SEGMENTS = ("head", "torso", "tail", "all")  # eBay Table 4 lists head, torso, tail
SIMULATED = "simulated"  # the click log's split, reported by head/torso/tail
REAL_COLUMNS = ("PR@1", "PR@3", "PR@10", "F1", "ECE", "ECE raw")


def has_simulated(report: dict) -> bool:
    return SIMULATED in report.get("query_sets", [SIMULATED])


def real_sets(report: dict) -> list[str]:
    return list(report.get("real_sets", {}))


def set_scores(model: dict, qset: str) -> dict:
    """A model's scores on a head/torso/tail segment (or all) or on a real-text set."""
    return model["query_sets"][qset] if qset in model.get("query_sets", {}) else model["segments"][qset]


def delta_sets(report: dict) -> list[str]:
    return (list(DELTA_SEGMENTS) if has_simulated(report) else []) + real_sets(report)


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


LENIENCY_COLUMNS = ("top-1 strict", "top-1 lenient", "severe", "severe confident")


def with_se(value: float | None, se: float | None) -> str:
    """A share and its standard error in percent, e.g. ``75.31 ± 0.77``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return percent(value) + ("" if se is None or math.isnan(se) else f" ± {100 * se:.2f}")


SEEN_COLUMN = "seen in training"
SEEN_NOTE = ("seen in training: how many of the evaluated (distinct) queries the model saw while it was trained or "
             "its settings were chosen, from the fingerprints its bundle records.")


def seen(model: dict, qset: str) -> str:
    """The model's overlap with its training queries on a segment or query set, as a cell."""
    entry = model.get("overlap", {}).get(qset)
    if entry is None or entry["seen"] is None:
        return "unknown"
    return f"{entry['seen']:,} ({100 * entry['share']:.1f}%)"


def tables(report: dict) -> list[Table]:
    k = report["options"]["k"]
    models = report["models"]
    columns = main_columns(k)
    out = []
    for segment in SEGMENT_ORDER if has_simulated(report) else ():
        n = report["segments"].get(segment) if segment != "all" else report["source"]["queries"]
        out.append(Table(
            f"{segment} queries ({n:,})",
            ("model",) + tuple(f"{c} (%)" for c in columns) + (SEEN_COLUMN,),
            [(m["name"],) + tuple(percent(m["segments"][segment][c]) for c in columns) + (seen(m, segment),)
             for m in models],
            note=SEEN_NOTE if segment == "all" else "",
        ))
    if real_sets(report):
        rows = []
        for qset in real_sets(report):
            info = report["real_sets"][qset]
            for i, m in enumerate(models):
                scores = set_scores(m, qset)
                rows.append((f"{qset} ({info['split']}, {info['queries']:,})" if i == 0 else "", m["name"])
                            + tuple(percent(scores[c]) if not c.startswith("ECE") else number(scores[c])
                                    for c in REAL_COLUMNS) + (seen(m, qset),))
        out.append(Table(
            "Real-text query sets (text the click simulator never produced)",
            ("query set", "model") + tuple(c if c.startswith("ECE") else f"{c} (%)" for c in REAL_COLUMNS)
            + (SEEN_COLUMN,),
            rows,
            note=("real-title: whole titles of catalog listings held out of the simulator, labelled with the "
                  "listing's category; real-2tok: their first two tokens; real-queries: real logged queries "
                  "mapped to the corpus taxonomy. ECE: expected calibration error of the top-1 score as "
                  "served (calibrated where the bundle has a calibration); ECE raw: of the uncalibrated scores. "
                  + SEEN_NOTE),
        ))
    unseen = unseen_table(report)
    out += [] if unseen is None else [Table(**unseen)]
    leniency_rows = []
    for qset in ((list(SEGMENT_ORDER) if has_simulated(report) else []) + real_sets(report)):
        for i, m in enumerate(models):
            scores = set_scores(m, qset)
            if "top-1 strict" not in scores:
                continue
            leniency_rows.append((qset if i == 0 else "", m["name"]) + tuple(
                with_se(scores.get(c), scores.get(c + " SE")) for c in LENIENCY_COLUMNS)
                + (percent(scores.get("confident share")),))
    if leniency_rows:
        out.append(Table(
            "Strict, lenient and severe top-1 (%, ± standard error)",
            ("query set", "model", "strict", "lenient", "severe", "severe, score ≥ 0.5", "answers scored ≥ 0.5"),
            leniency_rows,
            note=("strict: the top category is a true one (PR@1, the headline). lenient: it is a true one or "
                  "confusable with one, per the map named above (– without a map). severe: it sits under another "
                  "top-level category than every true one and is not lenient (an answer the map credits is never "
                  "also severe, even for a pair across departments); severe, score ≥ 0.5: the same among the "
                  "answers scored at least 0.5."),
        ))
    out += gold_tables(report)
    if len(models) > 1:
        base = models[0]
        rows = []
        for m in models[1:]:
            for i, qset in enumerate(delta_sets(report)):
                deltas = tuple(signed(set_scores(m, qset)[c] - set_scores(base, qset)[c]) for c in columns)
                rows.append((f"{m['name']} − {base['name']}" if i == 0 else "", qset) + deltas)
        out.append(Table(
            f"Differences against {base['name']} (percentage points, laid out like eBay's Table 4)",
            ("models", "QSet") + tuple(f"δ {c}" for c in columns),
            rows,
        ))
    out += [Table(**fields) for fields in node_tables(report, (list(SEGMENT_ORDER) if has_simulated(report) else [])
                                                      + real_sets(report))]
    if not has_simulated(report):
        return out
    extras = extra_columns(k)
    out.append(Table(
        "All queries: ranking, propensity-scored and regression metrics",
        ("model",) + extras + ("ECE raw",),
        [(m["name"],) + tuple(number(m["segments"]["all"][c]) for c in extras + ("ECE raw",)) for m in models],
        note=(f"PSP@{k} and PSnDCG@{k} are normalized by the best attainable value (as papers report them); "
              "the 'raw' columns are Jain et al.'s unbiased estimators, which can exceed 1. "
              "WP, WP-regret, Tau, XMAD, XRMSE and MAD compare scores with each query's click shares; "
              "ECE is the expected calibration error of the top-1 score as served, ECE raw of the "
              "uncalibrated scores."),
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


GOLD_FIGURES = ("exact", "acceptable", "severe", "precision")


def with_interval(figure: dict | None, sign: str = "", scale: float = 100.0, digits: int = 2) -> str:
    """A figure (``{value, low, high}``) and its 95% interval, times ``scale`` (percent by
    default), e.g. ``45.00 [30.00, 60.00]``; ``sign="+"`` for a difference; "–" when undefined."""
    if figure is None or figure.get("value") is None or math.isnan(figure["value"]):
        return "–"
    form = f"{sign}.{digits}f"

    def number(value: float) -> str:  # what rounds to zero is written 0 (+0.0 with a sign), never -0.0
        text = f"{scale * value:{form}}"
        return f"{0.0:{form}}" if float(text) == 0 else text

    if figure.get("low") is None or math.isnan(figure["low"]):
        return number(figure["value"])
    return f"{number(figure['value'])} [{number(figure['low'])}, {number(figure['high'])}]"


def unjudged(judged: dict) -> dict:
    """The share of queries whose top-1 nobody judged, from the ``judged`` figure (1 − it)."""
    def minus(x):
        return None if x is None else 1 - x

    return {"value": minus(judged["value"]), "low": minus(judged["high"]), "high": minus(judged["low"])}


def bounds(figure: dict, digits: int = 4, scale: float = 1.0) -> str:
    """`` (ungraded as wrong W, as right R)`` when answers nobody graded could move the figure."""
    wrong, right = figure.get("as_wrong"), figure.get("as_right")
    if wrong is None or right is None or wrong == right:
        return ""
    return f" (ungraded as wrong {scale * wrong:.{digits}f}, as right {scale * right:.{digits}f})"


# Table cells of human-judged figures (evaluate's report.md/html, the category session's report), in %.
def figure_cell(figure: dict, sign: str = "", digits: int = 2) -> str:
    """A figure in % with its interval and, where answers nobody graded could move it, its bounds."""
    return with_interval(figure, sign, digits=digits) + ("" if sign else bounds(figure, digits, 100.0))


def cap_cell(precision: dict, queries: int, digits: int = 2) -> str:
    """The best P@k the graded categories allow, in %, and how many queries cap it."""
    cap = precision.get("cap")
    if cap is None or queries == 0:
        return "–"
    return f"{100 * cap:.{digits}f} ({precision['capped']:,} of {queries:,} capped)"


def seen_cell(entry: dict | None) -> str:
    """``9 of 10 (90.0%)``, or ``unknown`` when the model records no training queries."""
    if entry is None or entry.get("seen") is None:
        return "unknown"
    return f"{entry['seen']:,} of {entry['queries']:,} ({100 * entry['share']:.1f}%)"


def ungraded_cell(ungraded: dict) -> str:
    """``2 of 50 / 9 of 150``: top-1 answers, then answers in the top k, nobody graded."""
    return (f"{ungraded['top1']:,} of {ungraded['answers_top1']:,} / {ungraded['topk']:,} of "
            f"{ungraded['answers_topk']:,}")


def wins_cell(paired: dict) -> str:
    """``wins / ties / losses / ungraded``."""
    return f"{paired['win']} / {paired['tie']} / {paired['loss']} / {paired.get('ungraded', 0)}"


def gold_tables(report: dict) -> list[Table]:
    """``qcat evaluate --gold``: each model's human-judged figures per segment and, with several
    models, each against the first (:mod:`qcat.evaluation.gold`)."""
    block = report.get("gold")
    if not block:
        return []
    models, k = report["models"], block["k"]
    name = block["source"].replace("\\", "/").rsplit("/", 1)[-1]
    segments = list(models[0]["gold"])
    rows = []
    for segment in segments:
        for i, m in enumerate(models):
            figures = m["gold"][segment]
            rows.append((f"{segment} ({figures['queries']:,})" if i == 0 else "", m["name"],
                         seen_cell(figures.get("seen_in_training")))
                        + tuple(figure_cell(figures[f]) for f in GOLD_FIGURES)
                        + (cap_cell(figures["precision"], figures["queries"]), with_interval(unjudged(figures["judged"])),
                           ungraded_cell(figures["ungraded"])))
    out = [Table(
        f"Human-judged categories ({name})",
        ("segment (queries)", "model", SEEN_COLUMN, "strict: exact", "lenient: acceptable", "severe", f"P@{k}",
         f"P@{k} at most", "top-1 unjudged", f"never graded (top-1 / top-{k} answers)"),
        rows,
        note=(f"Each model's top {k} on the graded gold's queries, against people's grades (3 exact, 2 acceptable, "
              "1 related, 0 wrong), in % with 95% bootstrap intervals (queries resampled, "
              f"{block['draws']:,} draws, seed {block['seed']}). seen in training: how many of the queries the "
              "model saw while it was trained or tuned (from its bundle's fingerprints). strict: the top-1 is graded "
              "exact; lenient: graded acceptable or exact; severe: graded wrong and under another top-level category "
              f"than every acceptable one; P@{k}: the share of the top {k} graded acceptable or exact; an answer "
              "nobody graded counts as neither acceptable nor severe, and where there are such answers each figure "
              "gives its bounds with them counted wrong and counted right. "
              f"P@{k} at most: the best P@{k} the graded categories allow (queries with fewer than {k} categories "
              "graded acceptable are capped). top-1 unjudged: the share of queries whose top-1 nobody graded; "
              "never graded: the answers nobody graded, top-1 and in the top k."),
    )]
    if len(models) > 1:
        base = models[0]
        rows = []
        for m in models[1:]:
            for i, segment in enumerate(segments):
                paired = m["gold_paired"][segment]
                rows.append((f"{m['name']} − {base['name']}" if i == 0 else "", segment, wins_cell(paired))
                            + tuple(with_interval(paired[f], "+") for f in GOLD_FIGURES))
        out.append(Table(
            f"Human-judged categories ({name}): differences against {base['name']}",
            ("models", "segment", "top-1 wins / ties / losses / ungraded", "δ strict", "δ lenient", "δ severe",
             f"δ P@{k}"),
            rows,
            note=("wins / ties / losses: queries where the model's top-1 has a higher, equal or lower grade than the "
                  "first model's (the same top-1 is a tie; no answer ranks below wrong); ungraded: queries whose two "
                  "top-1s differ and one was never graded (no evidence either way, not counted as a tie); δ: paired "
                  "differences in percentage points with 95% bootstrap intervals of the per-query differences."),
        ))
    return out


def header_lines(report: dict) -> list[str]:
    source = report["source"]
    p = report["propensity"]
    options = report["options"]
    sets = []
    if has_simulated(report):
        sets.append(f"Corpus {source['corpus']}, period {source['period']}, split {source['split']}: "
                    f"{source['queries']:,} {'click-log' if 'log' in source else 'simulated'} queries (head {report['segments']['head']:,}, torso "
                    f"{report['segments']['torso']:,}, tail {report['segments']['tail']:,} by 30/30/40% of impressions).")
    if real_sets(report):
        sets.append("Real-text query sets: " + ", ".join(
            f"{name} ({info['split']}, {info['queries']:,} queries)" for name, info in report["real_sets"].items()) + ".")
    sets += [f"Note: {note}." for note in report.get("notes", [])]
    return sets + [
        f"Each model's top {options['prediction_k']} per query; P/R/F1 use the categories scoring at least "
        f"{options['threshold']:g} (at least the top one).",
        f"Propensities: A = {p['A']:.3f}, B = {p['B']:.3f} ({'fitted' if p['fitted'] else 'Jain et al. defaults'}), "
        f"N = {p['N']:,} training queries.",
        "Models: " + "; ".join(f"{m['name']} ({m['backend']}, {m['directory']})" for m in report["models"]) + ".",
        "Confusable maps (lenient top-1): " + "; ".join(
            f"{m['name']}: " + (f"{m['confusable']['source']} ({m['confusable']['pairs']:,} pairs, sha256 "
                                f"{m['confusable']['sha256'][:12]}, {m['confusable']['origin']})"
                                if m.get("confusable") else "none") for m in report["models"]) + ".",
    ] + ([gold_header(report["gold"])] if report.get("gold") else []) + [
        f"Created {report['created']}.",
    ]


def gold_header(block: dict) -> str:
    """The report's line on the graded gold of ``--gold``."""
    session = f", judging session {block['session']}" if block.get("session") else ""
    segments = ", ".join(f"{name} {n:,}" for name, n in block["segments"].items())
    segments = f" ({segments})" if segments else ""
    return (f"Human-judged categories: {block['source']} ({block['queries']:,} queries{segments}, "
            f"{block['graded']:,} graded categories, sha256 {block['sha256'][:12]}{session}); each model's top "
            f"{block['k']} ({block['k_from']}).")


def markdown_text(text: str) -> str:
    """Text (names, notes: anything a user typed) as inert Markdown, as the HTML report escapes it:
    ``<>&`` HTML-escaped (no raw tag survives a renderer), backslashes, brackets and pipes
    backslash-escaped (no link, image or extra table cell), emphasis and code marks ``*_`~``
    backslash-escaped (a judge named ``**Bold**`` stays as typed), line breaks as spaces (a table row
    or a bullet stays one line)."""
    one_line = " ".join(str(text).splitlines())
    escaped = escape(one_line, quote=False).replace("\\", "\\\\")
    for special in "[]|*_`~":
        escaped = escaped.replace(special, "\\" + special)
    return escaped


def markdown_table(table: Table) -> str:
    lines = [f"### {markdown_text(table.title)}", "", "| " + " | ".join(map(markdown_text, table.header)) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.header))) + "|"]
    lines += ["| " + " | ".join(markdown_text(cell) for cell in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", markdown_text(table.note)]
    return "\n".join(lines)


def render_markdown(report: dict, plot_files: dict[str, str]) -> str:
    """The report as Markdown; ``plot_files`` maps a plot's title to its (relative) file."""
    return markdown_document("qcat evaluation report", header_lines(report), tables(report), plot_files)


def markdown_document(title: str, header: list[str], sections: list[Table], plot_files: dict[str, str]) -> str:
    """Header bullets, the main tables, the plots, then the detail tables."""
    parts = [f"# {markdown_text(title)}", "", *[f"- {markdown_text(line)}" for line in header], ""]
    parts += [markdown_table(t) + "\n" for t in sections if not t.detail]
    parts += ["## Plots", ""] + [f"![{name}]({path})\n" for name, path in plot_files.items()]
    parts += [markdown_table(t) + "\n" for t in sections if t.detail]
    return "\n".join(parts)
