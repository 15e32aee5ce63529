"""Node answers in ``qcat evaluate``: how often each model's node answers are right, and how deep.

A bundle with a node calibration (``nodes.json``, :mod:`qcat.models.calibration.nodes`) answers a
query at a precision P with the deepest taxonomy node its category lies beneath at least P of the
time (a department, an aisle, ..., or a leaf), or with no node. For each such model, on every
head/torso/tail segment (and all) and every real-text set, :func:`score_nodes` measures from one
model call per set (``Classifier.node_chains``, then ``answers(P)`` for each P):

- at each P of :data:`REPORTED`, :func:`qcat.measure.hierarchy.node_summary`: the share of
  answered queries whose node contains a true leaf (with its Wilson 95% interval), the mean
  depth (no node counting 0), the shares answered at a leaf and with no node;
- at :data:`HIERARCHICAL_AT`, hierarchical precision, recall and F1
  (:func:`qcat.measure.hierarchy.hierarchical_prf`);
- the precision-depth curve: precision and mean depth at every P the calibration keeps (0.50 to
  0.99), on all the simulated queries and on each real-text set.

Queries without a true leaf are left out, as the leaf figures leave them out. Nodes are scored on
the evaluation's taxonomy (the corpus's, with the ``Other`` leaves the models answer). A model
without a node calibration gets one note (:func:`no_nodes_note`). :func:`node_tables` lays the
figures out for report.py; plots.py draws the curve.

report.py imports this module for its tables, so what only the scoring needs (the classifier and
:mod:`qcat.measure.hierarchy`) is imported where it is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPORTED = (0.8, 0.9, 0.95)  # the precisions the "Node answers" table reports
HIERARCHICAL_AT = 0.9  # the precision hierarchical precision and recall are measured at
CURVE_KEYS = ("precision", "precision_low", "precision_high", "mean_depth", "none_share")


@dataclass(frozen=True)
class NodeSet:
    """A query set's queries, their truth (sparse, columns: the evaluation's label ids), the groups
    reported on it (name -> bool mask over the queries) and the group its curve is drawn for."""

    queries: np.ndarray
    truth: object  # scipy.sparse matrix (queries, labels)
    groups: dict[str, np.ndarray]
    curve: str


def node_sets(simulated, real: dict) -> list[NodeSet]:
    """The sets ``evaluate`` scores nodes on: ``simulated`` (its EvaluationSet, or None when the split
    is not reported) by all/head/torso/tail, and each real-text set (name -> (queries, truth))."""
    from qcat.measure.segments import SEGMENTS

    sets = []
    if simulated is not None:
        segment = simulated.segment
        groups = {"all": np.ones(len(segment), dtype=bool)} | {name: segment == s for s, name in enumerate(SEGMENTS)}
        sets.append(NodeSet(simulated.queries, simulated.truth, groups, "all"))
    for name, (queries, truth) in real.items():
        sets.append(NodeSet(queries, truth, {name: np.ones(len(queries), dtype=bool)}, name))
    return sets


def no_nodes_note(name: str, directory) -> str:
    """The report's one line on a model that cannot answer nodes."""
    return (f"{name} has no node calibration, so its node answers are not measured (add one: qcat train nodes "
            f"--model {directory} --out NEW_DIR)")


def node_classifier(model, directory):
    """A :class:`qcat.classifier.Classifier` of ``model`` as evaluated (the loaded model, without
    judged overrides) with its bundle's node calibration, or None when the bundle has none."""
    from qcat.bundles.bundle import read_manifest
    from qcat.classifier import Classifier
    from qcat.models.calibration.nodes import load_node_calibration

    manifest = read_manifest(directory, verify=False)  # evaluate's load_model verified every file
    nodes = load_node_calibration(manifest)
    return None if nodes is None else Classifier(model, model.taxonomy, Path(directory), manifest, nodes)


def positions_in(source, target) -> np.ndarray:
    """Each node of taxonomy ``source`` at its position in ``target`` (same id and path), else -1."""
    return np.array([target.index(node) if node in target and target.paths[target.index(node)] == path else -1
                     for node, path in zip(source.ids, source.paths)], dtype=np.int64)


def gold_positions(truth, label_at: np.ndarray) -> np.ndarray:
    """int64 (queries, most true leaves): each query's true leaves (positive truth) at their
    taxonomy positions (``label_at``: by truth column), -1 padded; a row of -1 has no truth."""
    import scipy.sparse as sp

    truth = (sp.csr_matrix(truth) > 0).tocsr()
    counts = np.diff(truth.indptr)
    gold = np.full((truth.shape[0], max(int(counts.max(initial=0)), 1)), -1, dtype=np.int64)
    rows = np.repeat(np.arange(truth.shape[0]), counts)
    gold[rows, np.arange(truth.nnz) - truth.indptr[rows]] = label_at[truth.indices]
    return gold


def score_nodes(classifier, table, label_ids, sets: list[NodeSet],
                progress: Callable[[str], None] = lambda message: None) -> dict:
    """The node figures of ``classifier`` (with a node calibration) on ``sets``, scored on ``table``
    (a :class:`qcat.measure.hierarchy.NodeTable` of the evaluation's taxonomy; ``label_ids`` the
    truth's columns): ``{"precisions", "hierarchical_at", "answers": {group: [summary with "P"]
    per REPORTED P], "hierarchical": {group: {"P", "precision", "recall", "f1"}}, "curves": {group:
    {"P": [...], "precision": [...], ...}}}``."""
    from qcat.errors import InputError
    from qcat.measure.hierarchy import contains, hierarchical_prf, node_summary
    from qcat.models.calibration.nodes import LEVELS

    taxonomy = table.taxonomy
    to_eval = positions_in(classifier.taxonomy, taxonomy)
    label_at = np.array([taxonomy.index(label) for label in label_ids], dtype=np.int64)
    out = {"precisions": list(REPORTED), "hierarchical_at": HIERARCHICAL_AT, "answers": {}, "hierarchical": {},
           "curves": {}}
    for node_set in sets:
        if len(node_set.queries) == 0:
            continue
        chains = classifier.node_chains(list(node_set.queries))  # the one model call of this set
        gold = gold_positions(node_set.truth, label_at)
        has_truth = gold[:, 0] >= 0
        at = {}  # P -> (each query's node, as a position of the evaluation's taxonomy; whether it is right)
        for level in LEVELS:
            answer = chains.answers(level)
            node = np.where(answer >= 0, to_eval[answer], -1)
            if np.any((answer >= 0) & (node < 0)):
                raise InputError(f"model {classifier.directory} answers nodes the evaluation's taxonomy lacks, e.g. "
                                 f"{classifier.taxonomy.ids[answer[(answer >= 0) & (node < 0)][0]]}")
            at[level] = node, contains(table, node, gold).any(axis=1)

        def summary(level: float, rows: np.ndarray, at: dict = at) -> dict:
            node, correct = at[level][0][rows], at[level][1][rows]
            return node_summary(correct, table.depth[node], node >= 0, table.leaf[node])

        for group, rows in node_set.groups.items():
            rows = rows & has_truth
            out["answers"][group] = [{"P": level} | summary(level, rows) for level in REPORTED]
            node = at[HIERARCHICAL_AT][0][rows].tolist()
            answers = [taxonomy.ids[i] if i >= 0 else None for i in node]
            truth = [[taxonomy.ids[j] for j in row if j >= 0] for row in gold[rows].tolist()]
            precision, recall, f1 = hierarchical_prf(table, answers, truth)
            out["hierarchical"][group] = {"P": HIERARCHICAL_AT, "precision": precision, "recall": recall, "f1": f1}
            progress(f"{group} {node_line(out['answers'][group][REPORTED.index(HIERARCHICAL_AT)])}")
        points = [summary(level, node_set.groups[node_set.curve] & has_truth) for level in LEVELS]
        out["curves"][node_set.curve] = {"P": list(LEVELS)} | {key: [p[key] for p in points] for key in CURVE_KEYS}
    return out


def node_line(summary: dict) -> str:
    """One line of a summary for the progress output."""
    return (f"node answers at P={summary['P']:g}: precision {interval(summary)}%, mean depth "
            f"{decimal(summary['mean_depth'])}, at a leaf {percent(summary['leaf_share'])}%, no node "
            f"{percent(summary['none_share'])}%")


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def percent(value) -> str:
    return "–" if missing(value) else f"{100 * value:.2f}"


def decimal(value) -> str:
    return "–" if missing(value) else f"{value:.2f}"


def interval(summary: dict) -> str:
    """``93.10 [91.20, 94.60]``: precision and its interval in %, "–" when nothing was answered."""
    if missing(summary["precision"]):
        return "–"
    return f"{percent(summary['precision'])} [{percent(summary['precision_low'])}, {percent(summary['precision_high'])}]"


def node_tables(report: dict, order: list[str]) -> list[dict]:
    """The "Node answers" table and the hierarchical one, as ``report.Table`` fields, for the
    models with a node calibration on the groups of ``order`` (segments, then real-text sets)."""
    models = [m for m in report["models"] if m.get("nodes")]
    if not models:
        return []
    rows, hierarchical = [], []
    for group in order:
        scored = [m for m in models if group in m["nodes"]["answers"]]
        for i, m in enumerate(scored):
            summaries = m["nodes"]["answers"][group]
            label = f"{group} ({summaries[0]['n']:,})" if i == 0 else ""
            for j, s in enumerate(summaries):
                rows.append((label if j == 0 else "", m["name"] if j == 0 else "", f"{s['P']:.2f}", interval(s),
                             decimal(s["mean_depth"]), percent(s["leaf_share"]), percent(s["none_share"])))
            h = m["nodes"]["hierarchical"][group]
            hierarchical.append((label, m["name"], percent(h["precision"]), percent(h["recall"]), percent(h["f1"])))
    return [
        {"title": "Node answers (the deepest taxonomy node right at least P of the time)",
         "header": ("query set (queries)", "model", "P", "precision (%) [95% interval]", "mean depth", "leaf (%)",
                    "no node (%)"),
         "rows": rows,
         "note": ("P: the precision the bundle's node calibration promises. precision: the share of the answered "
                  "queries whose node contains a true leaf (is it or one of its ancestors), with its Wilson 95% "
                  "interval. mean depth: "
                  "the answer's depth (a department 1, an aisle 2, ..., no node 0) over all the queries; leaf: the "
                  "share answered at a leaf; no node: the share left without one. Queries with no true leaf are "
                  "left out. The plot 'Node answers: precision against depth' draws P from 0.50 to 0.99.")},
        {"title": f"Node answers at P = {HIERARCHICAL_AT:g}: hierarchical precision, recall and F1 (%)",
         "header": ("query set (queries)", "model", "hP", "hR", "hF1"),
         "rows": hierarchical,
         "note": ("Kiritchenko et al.'s hierarchical figures, micro-averaged over queries: an answer counts with "
                  "its ancestors, the truth as its true leaves with theirs; hP = shared / answered nodes, hR = "
                  "shared / true nodes. A right node above the leaf costs recall, not precision; no node costs "
                  "recall only.")},
    ]
