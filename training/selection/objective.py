"""The validation objective every model choice is made on (DESIGN.md, "Evaluating on real text").

The simulated split alone rewards memorizing title fragments, so choices (NB smoothing and
noise threshold, the hybrid's long-query backend and cutoff, which model ships, the score
calibration) are made on a weighted mean of PR@1 over validation sets that include real text:

=============== ====== ===============================================================
set             weight what
=============== ====== ===============================================================
``simulated``   0.2    the validation split of the click log (queries by a seeded hash)
``real-title``  0.4    whole real titles of held-out listings, validation half
``real-2tok``   0.4    their first two tokens
=============== ====== ===============================================================

Real text weighs double the simulated split: the simulated split overstates what a model
knows (its queries are cut from the very titles the models train on), and the same weights
make the calibration (``qcat.training.selection.calibrate``) fit real text rather than the simulation's
easier queries. A corpus without real-text sets (a user's own log) is judged on its
validation split alone.
``real-queries`` (18 real Best Buy queries in the demo) is too small to choose on: it is
reported, never optimized.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from qcat.errors import InputError
from qcat.models.hybrid import CUTOFFS, HybridModel
from qcat.models.model import Model
from qcat.models.nb import NaiveBayesModel
from qcat.taxonomy import Taxonomy
from qcat.taxonomy.confusable import ConfusableMap
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import Dataset
from qcat.training.selection.decide import Decision, Outcomes, decide, objective_of
from qcat.training.selection.table_metrics import evaluate_pr, top1_hits, top1_lenient_hits

WEIGHTS = {"simulated": 0.2, "real-title": 0.4, "real-2tok": 0.4}

ValidationSets = dict[str, tuple[ClickTable, float]]


def own_split(sets: ValidationSets) -> ClickTable:
    """The validation split of the training data itself (the first set)."""
    return next(iter(sets.values()))[0]


def check_trainable(dataset: Dataset, sets: ValidationSets, backend: str) -> None:
    """Refuse, in one line, data that leaves no training or no validation pairs: no backend can
    be trained (or its settings chosen) on it. Every trainer calls this before fitting."""
    train, validation = dataset.train, own_split(sets)
    if len(train) == 0 or len(validation) == 0:
        source = next(iter(sets))  # the data's own split: catalog, log or simulated (a corpus)
        needs = {"catalog": "the catalog needs more usable listings (its titles are split 80/10/10)",
                 "log": "the log needs more queries (or a lower --min-clicks)"}.get(source, "the corpus needs more queries")
        raise InputError(f"cannot train {backend}: {len(train):,} training and {len(validation):,} validation "
                         f"(query, category) pairs; {needs}")


def validation_sets(dataset: Dataset, corpus=None) -> ValidationSets:
    """Name -> (validation table, weight), the data's own validation split first: ``simulated``
    for a corpus (simulated from its catalog), ``log`` for a user's click log; then a corpus's
    real-text sets."""
    split_name = getattr(corpus, "split_set", "simulated")
    sets = {split_name: (dataset.validation, WEIGHTS["simulated"])}
    if corpus is not None:
        taxonomy = dataset.taxonomy
        for name in corpus.real_sets():
            if name in WEIGHTS:
                sets[name] = (corpus.query_set(name, "validation", taxonomy), WEIGHTS[name])
    total = sum(weight for _, weight in sets.values())
    return {name: (table, weight / total) for name, (table, weight) in sets.items()}


def objective(model: Model, sets: ValidationSets) -> tuple[float, dict[str, float]]:
    """The weighted PR@1 of ``model`` and each set's PR@1."""
    per_set = {name: evaluate_pr(model, table, (1,))["pr@1"] for name, (table, _) in sets.items()}
    return sum(per_set[name] * weight for name, (_, weight) in sets.items()), per_set


BLENDS = (0.0, 0.2, 0.3, 0.5)  # NB's weight in a long query's score; 0 is the paper's routing
XMLQ_SHARES = (0.25, 0.5, 0.75)  # XML-Q's share of the long side when XReg and XML-Q are blended


PAIR = "xreg+xmlq"


def long_sides(long_models: dict[str, Model], only: str | None = None) -> list[tuple[tuple[Model, ...], tuple[float, ...]]]:
    """The long sides tried: each long model alone, then (given both) XReg and XML-Q blended at
    each of :data:`XMLQ_SHARES`; with ``only`` (``xmlq``, ``xreg`` or ``xreg+xmlq``) that side alone."""
    sides = [((long,), (1.0,)) for name, long in long_models.items() if only in (None, name)]
    if {"xreg", "xmlq"} <= long_models.keys() and only in (None, PAIR):
        pair = (long_models["xreg"], long_models["xmlq"])
        sides += [(pair, (1.0 - share, share)) for share in XMLQ_SHARES]
    if not sides:
        raise InputError(f"no long side {only!r} among the long models given ({', '.join(long_models)})")
    return sides


class _Remembered:
    """A part that answers a batch it was asked before from memory: the selection asks each part
    the same batches (the queries a cutoff routes to it, at the same depth) for every blend and
    share it tries, the calibration and the real-text summary after it ask them again (a blended
    top-k of any k up to ``BLEND_DEPTH`` asks the parts at that one depth). Training only: a
    bundle is saved from :func:`forget`'s hybrid."""

    def __init__(self, model: Model):
        self.model, self._answers = model, {}

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def predict(self, queries, k: int):
        key = (tuple(queries), k)
        if key not in self._answers:
            self._answers[key] = self.model.predict(queries, k)
        return self._answers[key]


def remember(model: Model) -> Model:
    """``model`` answering the batches it was asked before from memory (itself if it already does)."""
    return model if isinstance(model, _Remembered) else _Remembered(model)


def forget(hybrid: HybridModel) -> HybridModel:
    """``hybrid`` with its parts as they were before :func:`remember` (to save it)."""
    def plain(part):
        return part.model if isinstance(part, _Remembered) else part

    return replace(hybrid, nb=plain(hybrid.nb), longs=tuple(plain(long) for long in hybrid.longs))


def outcomes(model: Model, sets: ValidationSets, taxonomy: Taxonomy | None = None,
             confusable: ConfusableMap | None = None) -> Outcomes:
    """Each validation query's PR@1 (strict), or with a ``confusable`` map (and the ``taxonomy``
    whose leaves it pairs) its lenient top-1, per set: what paired comparisons
    (:mod:`~qcat.training.selection.decide`) use."""
    if confusable is None:
        return {name: top1_hits(model, table) for name, (table, _) in sets.items()}
    return {name: top1_lenient_hits(model, table, taxonomy, confusable) for name, (table, _) in sets.items()}


def weights_of(sets: ValidationSets) -> dict[str, float]:
    return {name: weight for name, (_, weight) in sets.items()}


def _row(hybrid: HybridModel, result: Outcomes, sets: ValidationSets) -> dict:
    return {"long_backend": hybrid.long_backend, "long_shares": list(hybrid.long_shares), "cutoff": hybrid.cutoff,
            "blend": hybrid.blend, "route_to": hybrid.route_to,
            "objective": round(objective_of(result, weights_of(sets)), 5)} | {
        f"pr@1 {name}": round(float(np.mean(values)) if len(values) else 0.0, 5) for name, values in result.items()}


def setting_name(row: dict) -> str:
    """A hybrid setting of the selection table in words."""
    if row.get("route_to", "hybrid") != "hybrid":
        return f"{row['route_to'].upper() if row['route_to'] == 'nb' else row['route_to']} alone"
    shares = "/".join(f"{s:g}" for s in row["long_shares"])
    return (f"{row['long_backend']}{f' {shares}' if len(row['long_shares']) > 1 else ''} cutoff {row['cutoff']} "
            f"blend {row['blend']:g}")


def default_setting(sides: list[tuple[tuple[Model, ...], tuple[float, ...]]], cutoffs: tuple[int, ...],
                    blends: tuple[float, ...]) -> tuple[tuple[Model, ...], tuple[float, ...], int, float]:
    """The stated default, fixed before any validation query is read: the paper's hybrid (eBay
    §3.1), NB for queries of one token and the long model behind it, unblended. Its long side is
    XML-Q (the paper's) where tried, else XReg, else the two at equal shares; a choice a flag fixes
    (``cutoffs`` or ``blends`` of one value) is the default's too."""
    def rank(side) -> int:
        names = tuple(long.backend for long in side[0])
        return 0 if names == ("xmlq",) else 1 if names == ("xreg",) else 2 if side[1] == (0.5, 0.5) else 3

    longs, shares = min(sides, key=rank)
    return (longs, shares, CUTOFFS[0] if CUTOFFS[0] in cutoffs else cutoffs[0],
            0.0 if 0.0 in blends else blends[0])


def choose_hybrid(nb: NaiveBayesModel, long_models: dict[str, Model], cutoffs: tuple[int, ...], sets: ValidationSets,
                  taxonomy: Taxonomy, blends: tuple[float, ...] = BLENDS, progress=None,
                  only: str | None = None, confusable: ConfusableMap | None = None
                  ) -> tuple[HybridModel, list[dict], Decision]:
    """The hybrid setting (long side, cutoff, blend) validation prefers, the table of every option
    tried, and the decision (:func:`~qcat.training.selection.decide.decide`).

    The default is stated, not chosen (:func:`default_setting`: the paper's hybrid). Every other
    setting, and each part alone (NB alone, a long model alone: a hybrid that routes every query to
    it), replaces it only when it wins by more than 2 paired standard errors. Given one setting
    only (every choice fixed by the caller), that setting is kept, and the decision still says how
    the others compare with it. With a ``confusable`` map the objective is lenient top-1 instead
    of PR@1."""
    remembered = {id(model): remember(model) for model in (nb, *long_models.values())}
    sides = long_sides(long_models, only)
    default_longs, default_shares, default_cutoff, default_blend = default_setting(sides, cutoffs, blends)
    alone = list({id(long): long for longs, _ in sides for long in longs}.values())  # each long model tried, once
    singles = [HybridModel(nb=nb, longs=default_longs, cutoff=default_cutoff, taxonomy=taxonomy, config={},
                           metrics={}, long_shares=default_shares, route_to="nb")]
    singles += [HybridModel(nb=nb, longs=(long,), cutoff=default_cutoff, taxonomy=taxonomy, config={}, metrics={},
                            route_to=long.backend) for long in alone]
    settings = [HybridModel(nb=nb, longs=longs, cutoff=cutoff, taxonomy=taxonomy, config={}, metrics={},
                            blend=blend, long_shares=shares)
                for longs, shares in sides for cutoff in cutoffs for blend in blends]
    candidates, results, table = singles + settings, [], []
    default = len(singles) + next(i for i, h in enumerate(settings) if (h.longs, h.long_shares, h.cutoff, h.blend)
                                  == (default_longs, default_shares, default_cutoff, default_blend))
    for i, hybrid in enumerate(candidates):
        result = outcomes(replace(hybrid, nb=remembered[id(nb)],
                                  longs=tuple(remembered[id(long)] for long in hybrid.longs)), sets, taxonomy,
                          confusable)
        results.append(result)
        row = _row(hybrid, result, sets) | {"default": i == default}
        table.append(row)
        if progress:
            progress(row)
    decision = decide([setting_name(row) for row in table], results, weights_of(sets), default)
    if len(settings) == 1:  # the caller fixed every choice: keep it, and say how the others compare
        decision = replace(decision, chosen=default, decided=False, fixed=True)
    decision.annotate(table)
    return candidates[decision.chosen], table, decision


def calibrate_hybrid(hybrid: HybridModel, sets: ValidationSets) -> HybridModel:
    """The hybrid's own calibration, fitted on its answers as routed (and blended) over
    ``sets``; its parts keep their own calibrations, which they answer with alone."""
    from qcat.training.selection.calibrate import fit_calibration

    return replace(hybrid, calibration=fit_calibration(replace(hybrid, calibration=None), sets))


def select_hybrid(nb: NaiveBayesModel, long_models: dict[str, Model], sets: ValidationSets, taxonomy: Taxonomy,
                  cutoffs: tuple[int, ...], blends: tuple[float, ...] = BLENDS, config: dict | None = None,
                  progress=None, only: str | None = None, confusable: ConfusableMap | None = None) -> HybridModel:
    """Choose the hybrid on the objective, calibrate it, and record the choice in its metrics. Parts
    given through :func:`remember` answer the calibration (and the caller's summaries after it) from
    the selection's answers; :func:`forget` the hybrid returned before saving it."""
    best, table, decision = choose_hybrid(nb, long_models, cutoffs, sets, taxonomy, blends, progress, only,
                                          confusable)
    hybrid = calibrate_hybrid(best, sets)
    chosen = {"long_backend": hybrid.long_backend, "long_shares": list(hybrid.long_shares), "cutoff": hybrid.cutoff,
              "blend": hybrid.blend, "route_to": hybrid.route_to}
    return replace(hybrid, config=config or {}, metrics={"selection": {
        "chosen": chosen, "objective_weights": {name: round(weight, 4) for name, (_, weight) in sets.items()},
        "objective": "strict PR@1" if confusable is None else "lenient top-1",
        "decision": decision.to_json(), "table": table}})
