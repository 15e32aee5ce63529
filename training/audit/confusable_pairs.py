"""Find the pairs of leaves a training split cannot tell apart (``qcat data audit``).

Three kinds of evidence, all from the training split alone (never a test split or a real-text set):

- **shared texts**: normalized queries (with a catalog: titles too, which join the training split
  as queries) clicked under both leaves, and of them those whose clicks **split**: each leaf has at
  least :data:`SPLIT_SHARE` of the query's clicks;
- **cross-fitted confusion**: a fast model (Naive Bayes with fixed settings) trained on k−1 folds
  of the training queries answers the held-out fold; a pair's confusions are the held-out queries
  of one leaf answered with the other, against what chance predicts: a leaf's missed queries
  landing on the other as often as the model answers it at all (``lift`` = observed / expected).

A pair is **confusable** when the data joins the two leaves (at least ``min_shared`` shared texts)
and one kind of evidence clears the same three bars: at least ``min_confusions`` of it, at a lift
of at least ``min_lift`` over chance, on at least ``min_rate`` of the two leaves' queries. The
evidence is the fast model's confusions, or the split texts themselves (issue 45, item 13): a text
clicked under both leaves is never a confusion (either answer is a clicked leaf), so a pair whose
texts split their clicks, the pair the data tells apart least, would otherwise never reach the
map. A split text's chance: a leaf's split texts pair it with another leaf as often as that leaf
is any training query's most-clicked leaf (each text counted once, half from each side). A leaf
with more than ``max_partners`` confusable partners is a finding, not a group: none of its pairs
enter the map.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from qcat.console.progress import task
from qcat.errors import InputError
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import Dataset, split_queries, subset_queries

SPLIT_SHARE = 0.2  # a leaf's share of a query's clicks for the query to count as split between two leaves
NB_THRESHOLD, NB_ALPHA = 1.0, 0.1  # the fast model's fixed settings (no tuning inside a fold)


@dataclass(frozen=True)
class AuditSettings:
    folds: int = 5
    min_confusions: int = 3
    min_lift: float = 5.0
    min_rate: float = 0.01
    min_shared: int = 2
    max_partners: int = 4
    seed: int = 0
    examples: int = 3

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ValueError(f"folds must be at least 2, got {self.folds}")
        if self.max_partners < 1:
            raise ValueError(f"max_partners must be at least 1, got {self.max_partners}")


@dataclass
class Audit:
    """What the audit found: every pair with evidence, ranked, and the leaves with too many partners."""

    settings: AuditSettings
    categories: np.ndarray  # the training split's categories (taxonomy ids)
    queries: int  # training queries
    held_out_errors: int  # the fast model's cross-fitted errors
    held_out_queries: int
    pairs: list[dict] = field(default_factory=list)  # ranked: confusable ones first
    hubs: list[dict] = field(default_factory=list)  # leaves with more than max_partners partners

    @property
    def confusable(self) -> list[dict]:
        return [pair for pair in self.pairs if pair["confusable"]]

    def nothing_mapped(self) -> str | None:
        """Why the map holds no pair (None when it holds one): see :func:`why_no_pair`."""
        return None if self.confusable else why_no_pair(self)

    def explained_share(self) -> float:
        """The share of the cross-fitted errors the map's pairs explain."""
        return sum(p["confusions"] for p in self.confusable) / max(self.held_out_errors, 1)


def click_matrix(table: ClickTable) -> sp.csr_matrix:
    return sp.csr_matrix((table.clicks, (table.pair_query, table.pair_category)),
                         shape=(len(table.queries), len(table.categories)))


def shared_texts(table: ClickTable) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``(categories, categories)`` counts of queries clicked under both, and of those whose clicks
    split (each of the two at least :data:`SPLIT_SHARE` of the query's clicks); upper triangles."""
    clicks = click_matrix(table)
    both = (clicks > 0).astype(np.float64)
    totals = np.asarray(clicks.sum(axis=1)).ravel()
    shares = sp.diags(1.0 / np.maximum(totals, 1e-300)) @ clicks
    split = (shares >= SPLIT_SHARE).astype(np.float64)
    return sp.triu(both.T @ both, k=1).tocsr(), sp.triu(split.T @ split, k=1).tocsr()


def folds_of(table: ClickTable, settings: AuditSettings) -> np.ndarray:
    """Each training query's fold (a seeded hash); refuses a split too small to cross-fit: fewer
    queries than folds, or every query in one fold (its model would train on nothing)."""
    fold = split_queries(table.queries, settings.seed, (1.0 / settings.folds,) * settings.folds)
    if len(table.queries) < settings.folds or len(np.unique(fold)) < 2:
        raise InputError(f"too few training queries ({len(table.queries):,}) for {settings.folds} folds: the audit "
                         f"cross-fits over --folds {settings.folds}; give a larger log")
    return fold


def cross_fitted_confusion(dataset: Dataset, table: ClickTable,
                           settings: AuditSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(categories, categories)`` counts of held-out queries whose most-clicked leaf is the row and
    whose answer, a wrong one, is the column; the held-out queries' count of each most-clicked leaf;
    how often each leaf was the answer (right or wrong); and the number of held-out queries."""
    from qcat.training.nb.trainer import build_model, count_features

    n = len(table.categories)
    fold = folds_of(table, settings)
    clicks = click_matrix(table)
    top = np.asarray(clicks.argmax(axis=1)).ravel()
    confusion = np.zeros((n, n), dtype=np.int64)
    answers = np.zeros(n, dtype=np.int64)
    with task(f"audit: cross-fitting a fast model over {settings.folds} folds", settings.folds) as advance:
        for f in range(settings.folds):
            held = fold == f
            train = subset_queries(table, ~held)
            model = build_model(count_features(train), train, dataset, NB_THRESHOLD, NB_ALPHA, {})
            position = {label: i for i, label in enumerate(table.categories)}
            to_table = np.array([position[label] for label in model.labels], dtype=np.int64)
            rows = np.nonzero(held)[0]
            answer = model.predict(list(table.queries[rows]), 1).labels[:, 0]
            answered = answer >= 0
            rows, predicted = rows[answered], to_table[answer[answered]]
            answers += np.bincount(predicted, minlength=n)
            found = clicks[rows, predicted]
            wrong = (found.toarray() if sp.issparse(found) else np.asarray(found)).ravel() <= 0
            np.add.at(confusion, (top[rows[wrong]], predicted[wrong]), 1)
            advance()
    return confusion, np.bincount(top, minlength=n), answers, len(table.queries)


def audit(dataset: Dataset, settings: AuditSettings = AuditSettings()) -> Audit:
    """Audit ``dataset``'s training split (see the module docstring)."""
    table = dataset.train
    confusion, per_leaf, answers, held_out = cross_fitted_confusion(dataset, table, settings)  # refuses too few
    both, split = shared_texts(table)
    split_expected = split_chance(split, per_leaf)
    errors = int(confusion.sum())
    # Chance: a missed query of leaf a lands on b as often as the model answers b at all (among the
    # answers other than a).
    missed = confusion.sum(axis=1).astype(np.float64)
    answer_share = answers / max(int(answers.sum()), 1)
    expected = np.outer(missed / np.maximum(1.0 - answer_share, 1e-12), answer_share)
    np.fill_diagonal(expected, 0.0)
    symmetric = confusion + confusion.T
    candidates = set(zip(*np.nonzero(np.triu(symmetric, k=1)))) | set(zip(*both.nonzero()))
    taxonomy = dataset.taxonomy
    pairs = []
    for a, b in candidates:
        observed = int(symmetric[a, b])
        shared = int(both[a, b])
        if observed == 0 and shared < settings.min_shared:
            continue  # one shared text and no confusion: not worth a line
        chance = float(expected[a, b] + expected[b, a])
        lift = observed / chance if chance > 0 else (float("inf") if observed else 0.0)
        rate = observed / max(int(per_leaf[a] + per_leaf[b]), 1)
        splits = int(split[a, b])
        split_lift = splits / split_expected[a, b] if split_expected[a, b] > 0 else (float("inf") if splits else 0.0)
        split_rate = splits / max(int(per_leaf[a] + per_leaf[b]), 1)
        evidence = [name for name, (count, times, share) in (("confusions", (observed, lift, rate)),
                                                             ("split texts", (splits, split_lift, split_rate)))
                    if passes(count, times, share, shared, settings)]
        pairs.append({
            "leaf_a": str(table.categories[a]), "leaf_b": str(table.categories[b]),
            "path_a": taxonomy.path_of(table.categories[a]), "path_b": taxonomy.path_of(table.categories[b]),
            "confusions": observed, "a_as_b": int(confusion[a, b]), "b_as_a": int(confusion[b, a]),
            "expected": round(chance, 3), "lift": round(lift, 2) if np.isfinite(lift) else None,
            "confusion_rate": round(rate, 4), "share_of_errors": round(observed / max(errors, 1), 5),
            "shared_texts": shared, "split_texts": splits,
            "split_lift": round(split_lift, 2) if np.isfinite(split_lift) else None, "split_rate": round(split_rate, 4),
            "queries_a": int(per_leaf[a]), "queries_b": int(per_leaf[b]),
            "confusable": bool(evidence), "evidence": " and ".join(evidence) or None,
            "_index": (a, b),
        })
    pairs.sort(key=lambda p: (-p["confusable"], -p["confusions"], -p["shared_texts"], p["leaf_a"], p["leaf_b"]))
    hubs = _hubs(pairs, settings.max_partners, taxonomy)
    examples = _examples(table, [p for p in pairs[:200]], settings.examples)
    for pair in pairs:
        pair["examples"] = examples.get(pair.pop("_index"), [])
    return Audit(settings, table.categories, len(table.queries), errors, held_out, pairs, hubs)


def passes(count: int, lift: float, rate: float, shared: int, settings: AuditSettings) -> bool:
    """Whether one kind of evidence (confusions, or split texts) makes a pair confusable."""
    return (count >= settings.min_confusions and (not np.isfinite(lift) or lift >= settings.min_lift)
            and rate >= settings.min_rate and shared >= settings.min_shared)


def split_chance(split: sp.csr_matrix, per_leaf: np.ndarray) -> np.ndarray:
    """``(categories, categories)``, symmetric: the split texts each pair would have by chance. Leaf
    a's split texts (with any partner) pair it with b as often as b is any training query's
    most-clicked leaf among the leaves other than a; a text has two sides, so the pair's chance is
    the mean of a's and b's."""
    counts = split.toarray()
    counts = counts + counts.T
    partnered = counts.sum(axis=1).astype(np.float64)
    share = per_leaf / max(int(per_leaf.sum()), 1)
    one_side = np.outer(partnered / np.maximum(1.0 - share, 1e-12), share)
    np.fill_diagonal(one_side, 0.0)
    return (one_side + one_side.T) / 2.0


def _hubs(pairs: list[dict], max_partners: int, taxonomy) -> list[dict]:
    """Leaves with more than ``max_partners`` confusable partners; their pairs leave the map."""
    partners: dict[str, list[str]] = {}
    for pair in pairs:
        if pair["confusable"]:
            partners.setdefault(pair["leaf_a"], []).append(pair["leaf_b"])
            partners.setdefault(pair["leaf_b"], []).append(pair["leaf_a"])
    hubs = {leaf: found for leaf, found in partners.items() if len(found) > max_partners}
    for pair in pairs:
        if pair["confusable"] and (pair["leaf_a"] in hubs or pair["leaf_b"] in hubs):
            pair["confusable"], pair["left_out"] = False, "a leaf of the pair has too many partners (a hub)"
    return [{"leaf": leaf, "path": taxonomy.path_of(leaf), "partners": len(found),
             "partner_paths": [taxonomy.path_of(p) for p in found]}
            for leaf, found in sorted(hubs.items(), key=lambda item: (-len(item[1]), item[0]))]


def _examples(table: ClickTable, pairs: list[dict], n: int) -> dict[tuple[int, int], list[str]]:
    """Up to ``n`` shared texts of each pair, most clicked first."""
    clicks = click_matrix(table).tocsc()
    out = {}
    for pair in pairs:
        a, b = pair["_index"]
        col_a, col_b = clicks[:, a], clicks[:, b]
        common = np.intersect1d(col_a.indices, col_b.indices)
        if len(common) == 0:
            continue
        weight = np.asarray(col_a[common].todense()).ravel() + np.asarray(col_b[common].todense()).ravel()
        out[(a, b)] = [str(table.queries[q]) for q in common[np.argsort(-weight, kind="stable")[:n]]]
    return out


def why_no_pair(found: Audit) -> str:
    """Why no pair reached the map: no pair had evidence, every one was a hub's, or the bars the
    best-evidenced pair missed (issue 53, item 10). With two leaves chance already puts one leaf's
    confusions and split texts on the other: a confusion's lift cannot pass 1, a split text's 2 (its
    chance is the mean of its two sides'), said so."""
    s = found.settings
    if not found.pairs:
        return (f"no two leaves share {s.min_shared} clicked texts (--min-shared) and the fast model confused no two "
                "leaves")
    if any(p.get("left_out") for p in found.pairs):
        return f"every pair that cleared the bars has a leaf with more than {s.max_partners} partners (--max-partners)"

    def missed(p: dict, count: int, lift: float | None, rate: float, kind: str) -> list[str]:
        return [why for failed, why in (
            (count < s.min_confusions, f"{count} {kind} (--min-confusions {s.min_confusions})"),
            (lift is not None and lift < s.min_lift, f"{kind} lift {lift:.1f} over chance (--min-lift {s.min_lift:g})"),
            (rate < s.min_rate, f"{kind} on {rate:.1%} of the two leaves' queries (--min-rate {s.min_rate:g})"),
            (p["shared_texts"] < s.min_shared, f"{p['shared_texts']} shared texts (--min-shared {s.min_shared})"))
            if failed]

    best = max(found.pairs, key=lambda p: (max(p["split_texts"], p["confusions"]), p["shared_texts"]))
    use_split = best["split_texts"] >= best["confusions"]
    bars = (missed(best, best["split_texts"], best["split_lift"], best["split_rate"], "split texts") if use_split
            else missed(best, best["confusions"], best["lift"], best["confusion_rate"], "confusions"))
    reason = (f"no pair cleared the bars; the best, {best['path_a']} and {best['path_b']}, has "
              + ", ".join(dict.fromkeys(bars)))
    if len(found.categories) == 2 and s.min_lift > 2:
        reason += (f". With 2 leaves chance alone puts what one leaf shares on the other, so lift cannot pass 2 "
                   f"(--min-lift {s.min_lift:g}): a log of more leaves, or a lower --min-lift, can map them")
    return reason
