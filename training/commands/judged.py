"""``--judged FILE`` (repeatable), ``--judged-weight W`` and ``--overrides`` of ``qcat train``: training
on what people graded (issue 47; the pairs themselves: :mod:`qcat.training.data.judged`).

The judged queries are taken out of every validation set before anything is chosen, then the model
trains with the judged pairs at each weight of :data:`JUDGED_WEIGHTS` (clicks of an exact pair) and
the weight is chosen on the validation objective by the paired 2-SE rule
(:mod:`qcat.training.selection.decide`): :data:`DEFAULT_JUDGED_WEIGHT` is kept unless another weight
beats it by more than 2 paired standard errors. With a catalog, its settings are chosen first (at the
default weight), then the weight at those settings. XML-Q does not try the grid (one network per
weight): it trains at the default unless ``--judged-weight`` gives one. The manifest's
``data.judged`` records each file (name, sha256, queries, pairs, negatives: never the trainer's
directories), the weight and how it was set; every judged query is recorded as seen in training.

``--judged-weight`` lies in [:data:`MIN_JUDGED_WEIGHT`, :data:`MAX_JUDGED_WEIGHT`], refused at parse
time otherwise (issue 53 item 1): the pseudo-clicks of a pair (the weight, half of it for an
acceptable one, added to the log's clicks) go into float32 click tables, which hold whole numbers
exactly only up to 2**24, and a weight of 1e39 overflows them. What the weight does to each part
(:data:`WEIGHT_EFFECT`) is in the flag's help and printed by training.
"""

from __future__ import annotations

import argparse
import inspect
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.errors import InputError
from qcat.inputs.paths import check_file
from qcat.training.data.judged import MAX_JUDGED_WEIGHT, MIN_JUDGED_WEIGHT

JUDGED_WEIGHTS = (1.0, 3.0, 10.0, 30.0)
DEFAULT_JUDGED_WEIGHT = 10.0  # an exact pair counts 10 clicks, an acceptable one 5
DEFAULT_RERANK_JUDGED_WEIGHT = 1.0  # qcat train rerank: a judged query weighs as much as a validation query
XREG_FULL_WEIGHT = 10.0  # qcat.training.data.dataset.MIN_SEARCHES: a new judged query's searches
# What the weight does to each part (issue 53's measure on the demo's real titles), for the help and the output.
WEIGHT_EFFECT = {
    "NB": "NB: the pair's clicks in its counts; large weights cost accuracy on other titles (measured on the "
          "demo's real titles when issue 53 was filed: -1.2 points at 1,000, -5.5 at 10,000)",
    "XReg": f"XReg: relevance is clicks over searches capped at 1, a judged query counting at least "
            f"{XREG_FULL_WEIGHT:g} searches, so above {XREG_FULL_WEIGHT:g} the weight changes nothing for a "
            "query new to the log (measured on the demo's real titles when issue 53 was filed: nothing at all)",
    "XML-Q": "XML-Q: ignored (its targets are each query's categories, whatever their clicks)",
}


def add_judged_flags(parser: argparse.ArgumentParser, kind: str = "model") -> None:
    """``--judged``, ``--judged-weight`` and ``--overrides``. ``kind``: ``model`` (the weight chosen on
    validation), ``xmlq`` (the weight fixed: no grid) or ``hybrid`` (no weight: its parts trained)."""
    group = parser.add_argument_group("judged queries (docs: guide/training.md, \"Training on judged queries\")")
    if kind == "hybrid":
        group.add_argument("--judged", type=Path, action="append", default=[], metavar="FILE",
                           help="a graded gold file (repeatable; give the files its parts trained with): its queries "
                                "leave the validation sets the hybrid is chosen on and the test figures, and are "
                                "recorded as seen in training")
    else:
        group.add_argument("--judged", type=Path, action="append", default=[], metavar="FILE",
                           help="a graded gold file (qcat judge export --gold; repeatable): its exact and acceptable "
                                "categories train as pairs of their query, its judged queries leave every validation "
                                "and test set and are recorded as seen in training; categories graded wrong are "
                                "negatives for XReg (relevance 0, even if clicked); NB and XML-Q ignore them")
        choice = (f"default: chosen from {', '.join(f'{w:g}' for w in JUDGED_WEIGHTS)} on the validation objective, "
                  f"{DEFAULT_JUDGED_WEIGHT:g} kept unless another wins by more than 2 paired SE" if kind == "model"
                  else f"default {DEFAULT_JUDGED_WEIGHT:g}, not chosen: a grid would train one network per weight")
        group.add_argument("--judged-weight", type=_positive, default=None, metavar="W",
                           help=f"clicks a judged exact pair counts for (acceptable: half), from "
                                f"{MIN_JUDGED_WEIGHT:g} to {MAX_JUDGED_WEIGHT:,.0f}; {choice}. "
                                + "; ".join(WEIGHT_EFFECT.values()))
    group.add_argument("--overrides", action="store_true",
                       help="store the judged exact categories in the bundle, so serving answers a judged query with "
                            "them first (needs --judged)")


def add_rerank_judged_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("judged queries (docs: guide/training.md, \"Training on judged queries\")")
    group.add_argument("--judged", type=Path, action="append", default=[], metavar="FILE",
                       help="a graded gold file (repeatable): its queries train the ranker as one more set (a candidate "
                            "graded exact or acceptable is relevant, one graded wrong is not, even if clicked) and "
                            "leave the validation sets the settings are chosen on and the test figures")
    group.add_argument("--judged-weight", type=_positive, default=None, metavar="W",
                       help=f"a judged query's weight in the ranker's training, in validation queries, from "
                            f"{MIN_JUDGED_WEIGHT:g} to {MAX_JUDGED_WEIGHT:,.0f} (default "
                            f"{DEFAULT_RERANK_JUDGED_WEIGHT:g}, not chosen: a grid would cross-fit once per weight)")


def _positive(text: str) -> float:
    """``--judged-weight``'s type: a number in [MIN_JUDGED_WEIGHT, MAX_JUDGED_WEIGHT] (module docstring)."""
    from qcat.cli import float_in

    try:
        return float_in(MIN_JUDGED_WEIGHT, MAX_JUDGED_WEIGHT)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be a number from {MIN_JUDGED_WEIGHT:g} to {MAX_JUDGED_WEIGHT:,.0f}, got {text} (the clicks of a "
            "judged pair go into float32 click tables, which hold whole numbers exactly only up to 2**24)") from None


def weight_notes(name: str, weight: float, given: bool = True) -> list[str]:
    """What ``weight`` does to the part ``name`` (NB, XReg, XML-Q), said when training; where the part
    ignores it (XML-Q; XReg above its cap for the judged queries new to the log), said so."""
    effect = WEIGHT_EFFECT.get(name)
    if effect is None:
        return []
    notes = [f"judged weight {weight:g}: {effect}"]
    if name == "XML-Q" and given:
        notes.append(f"XML-Q: --judged-weight {weight:g} is ignored: the judged pairs are targets at any weight")
    if name == "XReg" and weight > XREG_FULL_WEIGHT:
        notes.append(f"XReg: judged weight {weight:g} is above {XREG_FULL_WEIGHT:g}: an exact pair of a judged query "
                     f"new to the log is fully relevant from {XREG_FULL_WEIGHT:g}, the rest of the weight changes "
                     "nothing for it")
    return notes


def check_judged_flags(args: argparse.Namespace) -> None:
    """Refuse, before any work, flags that need ``--judged`` without it, and judged files that are
    missing or malformed (their categories are checked once the taxonomy is read)."""
    from qcat.measure.graded_gold import read_graded_gold

    judged = getattr(args, "judged", None) or []
    if not judged:
        for flag, value in (("--judged-weight", getattr(args, "judged_weight", None)),
                            ("--overrides", getattr(args, "overrides", False))):
            if value not in (None, False):
                raise InputError(f"{flag} is for --judged FILE")
        return
    for path in judged:
        check_file(path, "--judged")
        read_graded_gold(path, flag="--judged", say=None)  # said once, when read for training (read_judged)
    if getattr(args, "overrides", False) and "overrides" not in _save_bundle_parameters():
        raise InputError("--overrides: this qcat's bundles cannot store overrides yet (save_bundle has no overrides)")


def _save_bundle_parameters():
    from qcat.training.commands.bundles import save_bundle

    return inspect.signature(save_bundle).parameters


@dataclass
class JudgedRun:
    """What a command read from ``--judged`` and what it passes on to its bundle."""

    judged: object | None = None  # qcat.training.data.judged.Judged
    record: dict = field(default_factory=dict)

    def also_seen(self) -> list[np.ndarray]:
        """The judged queries' fingerprints: all of them count as seen in training."""
        from qcat.training.data.provenance import fingerprints

        return [fingerprints(sorted(self.judged.queries))] if self.judged is not None else []

    def save_options(self, args: argparse.Namespace) -> dict:
        """``save_bundle``'s keyword arguments: ``overrides`` with ``--overrides``."""
        if not getattr(args, "overrides", False):
            return {}
        return {"overrides": self.judged.exact()}


def read_and_exclude(paths: list[Path], taxonomy, sets, log=print):
    """The judged files read against ``taxonomy`` and ``sets`` without their queries (printed)."""
    from qcat.training.data.judged import read_judged, without_judged

    judged = read_judged(paths, taxonomy)
    log(judged.describe())
    for note in judged.notes:
        log(note)
    before = {name: len(table.queries) for name, (table, _) in sets.items()}
    sets, removed = without_judged(sets, judged)
    check_validation_left(before, removed)
    log("judged queries removed from the validation sets choices are made on: "
        + ", ".join(f"{name} {count:,}" for name, count in removed.items()))
    return judged, sets, removed


def check_validation_left(before: dict[str, int], removed: dict[str, int]) -> None:
    """Refuse, naming the counts, judged files that took every query of the data's own validation split
    (the first set): nothing would be left to choose a setting on (issue 53 item 3)."""
    name = next(iter(before), None)
    if name is None or before[name] == 0 or removed.get(name, 0) < before[name]:
        return
    raise InputError(f"--judged: the judged files hold all {before[name]:,} queries of the {name} validation split "
                     f"(they leave it, since the model trains on them), so no validation query is left to choose "
                     f"settings on: give fewer judged queries of this data, or more data (a log with more queries "
                     f"than the judged files cover)")


def describe_moved(counts: dict) -> str:
    return (f"judged queries moved to train: {counts['moved_from_validation']:,} from the validation split, "
            f"{counts['moved_from_test']:,} from the test split (the test figures leave them out)")


def fit_judged(fit_one, dataset, sets, judged, weight: float | None, negatives: bool, name: str, catalog=None,
               fixed: dict | None = None, log=print):
    """``fit_one(dataset, sets) -> model`` with the judged pairs (``judged`` None: without), on
    ``dataset`` or, with ``catalog`` (a :class:`qcat.training.catalog.data.CatalogData`), once per
    catalog setting. ``weight`` None: chosen from :data:`JUDGED_WEIGHTS` (module docstring).
    ``sets`` must already be without the judged queries. Returns the model, the dataset it trained
    on (judged pairs in), the catalog's record (None without one) and the judged record."""
    from qcat.training.data.judged import ACCEPTABLE_SHARE, with_judged

    def at(w: float):
        def fit(data, sets_):
            if judged is None:
                return fit_one(data, sets_)
            # Each weight tried trains once, on the same counts: say which (issue 53 item 13d)
            log(f"{name} at judged weight {w:g}" + (" (the default)" if weight is None and w == start else "") + ":")
            return fit_one(with_judged(data, judged, w, negatives)[0], sets_)
        return fit

    start = DEFAULT_JUDGED_WEIGHT if weight is None else weight
    catalog_record = None
    if catalog is None:
        model, base = at(start)(dataset, sets), dataset
    else:
        model, base, catalog_record = catalog.fit(at(start), sets, fixed or {}, name, log)
    if judged is None:
        return model, base, catalog_record, {}
    rows, chosen_by = [], "flags" if weight is not None else "default"
    if weight is None and len(JUDGED_WEIGHTS) > 1:
        model, weight, rows = _choose_weight(at, model, base, sets, name, log)
        chosen_by = "validation objective"
    weight = start if weight is None else weight
    trained, counts = with_judged(base, judged, weight, negatives)
    log(f"{name}: judged weight {weight:g} ({chosen_by}); " + describe_moved(counts))
    for note in weight_notes(name, weight, given=chosen_by == "flags"):
        log(note)
    record = {"files": [f.as_dict() for f in judged.files], "queries": len(judged.grades), "weight": weight,
              "acceptable_share": ACCEPTABLE_SHARE, "chosen_by": chosen_by, "weight_effect": WEIGHT_EFFECT.get(name),
              "negatives": "relevance 0: the pair left out of training" if negatives else "ignored",
              "selection": rows} | counts
    return model, trained, catalog_record, record


def _choose_weight(at, first_model, base, sets, name: str, log):
    """The model and weight of :data:`JUDGED_WEIGHTS` the 2-SE rule keeps, and the table of candidates."""
    from qcat.training.selection.decide import decide
    from qcat.training.selection.objective import outcomes, weights_of

    models, results = {}, []
    log(f"judged weight ({name}): clicks of an exact pair -> validation objective")
    for w in JUDGED_WEIGHTS:
        models[w] = first_model if w == DEFAULT_JUDGED_WEIGHT else at(w)(base, sets)
        results.append(outcomes(models[w], sets))
    decision = decide([f"judged weight {w:g}" for w in JUDGED_WEIGHTS], results, weights_of(sets),
                      JUDGED_WEIGHTS.index(DEFAULT_JUDGED_WEIGHT))
    for w, row in zip(JUDGED_WEIGHTS, decision.rows):
        mark = "  (the default)" if w == DEFAULT_JUDGED_WEIGHT else ""
        log(f"  {w:>5g}  objective {row['objective']:.4f}  {row['difference']:+.4f} ± {row['paired_se']:.4f}{mark}")
    log(decision.summary())
    weight = JUDGED_WEIGHTS[decision.chosen]
    return models[weight], weight, decision.rows


def fit_on_judged_data(args: argparse.Namespace, data, fit_one, name: str, negatives: bool = False,
                       grid: bool = True):
    """:func:`qcat.training.commands.data_flags.fit_on_data` with ``--judged``: the model, its dataset
    (judged pairs in), ``data`` block (with ``judged``), validation sets (without the judged
    queries) and the :class:`JudgedRun`. ``negatives``: the model learns from pairs graded wrong
    (XReg); ``grid``: the weight is chosen unless given (not for XML-Q)."""
    from qcat.training.catalog.data import CatalogData
    from qcat.training.commands.data_flags import catalog_flags, fit_on_data, load_dataset, print_objective

    check_judged_flags(args)
    if not args.judged:
        return (*fit_on_data(args, data, fit_one, name), JudgedRun())
    dataset, source, sets = load_dataset(args, data)
    judged, sets, removed = read_and_exclude(args.judged, dataset.taxonomy, sets)
    catalog = data[0] if isinstance(data[0], CatalogData) else None
    if catalog is not None:
        print_objective(sets)
    weight = args.judged_weight if args.judged_weight is not None or grid else DEFAULT_JUDGED_WEIGHT
    model, trained, catalog_record, record = fit_judged(fit_one, dataset, sets, judged, weight, negatives, name,
                                                        catalog, catalog_flags(args))
    if not grid and args.judged_weight is None:
        record["chosen_by"] = "default (not chosen for this backend)"
    record["removed_from_validation_sets"] = removed
    source = dict(source) | ({"catalog_training": catalog_record} if catalog_record is not None else {})
    return model, trained, source | {"judged": record}, sets, JudgedRun(judged, record)


def judged_for_selection(args: argparse.Namespace, dataset, sets, log=print):
    """``qcat train hybrid`` and ``rerank``: the judged queries out of the validation sets and the test
    split (moved to train). Returns the dataset, the sets and the :class:`JudgedRun`."""
    from qcat.training.data.judged import with_judged

    check_judged_flags(args)
    if not args.judged:
        return dataset, sets, JudgedRun()
    judged, sets, removed = read_and_exclude(args.judged, dataset.taxonomy, sets, log)
    dataset, counts = with_judged(dataset, judged, 1.0)
    log(describe_moved(counts))
    record = {"files": [f.as_dict() for f in judged.files], "queries": len(judged.grades),
              "removed_from_validation_sets": removed} | counts
    return dataset, sets, JudgedRun(judged, record)


def check_parts_judged(manifests: dict, judged: JudgedRun) -> None:
    """Refuse a hybrid whose parts (flag -> manifest) trained on a judged file not given to it with
    ``--judged``: it would be chosen on queries its parts trained on."""
    given = {f.sha256 for f in judged.judged.files} if judged.judged is not None else set()
    for flag, manifest in manifests.items():
        for recorded in manifest.config.get("data", {}).get("judged", {}).get("files", []):
            if recorded.get("sha256") not in given:
                named = recorded.get("name") or recorded.get("path")
                raise InputError(f"{flag} {manifest.directory} was trained on --judged {named} (sha256 "
                                 f"{str(recorded.get('sha256'))[:12]}…): give it "
                                 f"to the hybrid too (--judged FILE), so the hybrid is not chosen on its queries")


def judged_table(dataset, judged):
    """The judged queries as a click table for the re-ranker: a query's categories are those clicked
    or graded exact or acceptable, less those graded wrong."""
    from qcat.training.data.dataset import subset_queries
    from qcat.training.data.judged import is_judged, with_judged

    table = with_judged(dataset, judged, 1.0, negatives=True)[0].table
    return subset_queries(table, is_judged(table.queries, judged))
