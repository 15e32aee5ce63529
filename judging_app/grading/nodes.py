"""Node answers in category sessions (issue 52).

``qcat judge create-session --kind categories --precision P`` shows judges, beside the models' top
categories, each model's *node answer* at P: the deepest taxonomy node (a department, an aisle, ...,
or a leaf) its node calibration says the query's category lies beneath at least P of the time
(:mod:`qcat.models.calibration.nodes`, answered from one call of the model per batch through
:meth:`qcat.classifier.Classifier.node_chains`). The node joins the categories shown, blind like
the rest, in the judge's own order; a node already among them is shown once, and a broader node
that fits is "2 Acceptable" by the guidelines.

Each model's list records which of its categories is its node answer
(``result_items.answer``, :data:`qcat.judging.store.models.ANSWERS`): ``top+node`` on one of its
top k, else a ``leaf-node`` or ``inner-node`` item after them. A model without a node calibration
(``nodes.json``) is refused in one line before any work (:func:`check_node_calibrations`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from qcat.errors import InputError
from qcat.judging.grading.sessions import Listing, QuerySpec
from qcat.judging.store.models import NODE_ANSWERS, TOP_ANSWERS
from qcat.measure.judged import MIX_NAMES, mix_name
from qcat.taxonomy import SEPARATOR


def check_node_calibrations(model_dirs: Sequence[Path]) -> None:
    """Refuse ``--precision`` for a model whose bundle has no node calibration, in one line."""
    from qcat.bundles.bundle import read_manifest
    from qcat.models.calibration.nodes import NODES_FILE, no_node_calibration

    for directory in model_dirs:
        if NODES_FILE not in read_manifest(directory, verify=False).data["files"]:
            raise InputError(no_node_calibration(directory))


def node_classifiers(model_dirs: Sequence[Path]) -> list:
    """Each model as a :class:`qcat.classifier.Classifier` (without judged overrides, as the
    session's top categories are taken), to answer nodes; its ``model`` answers the top k."""
    from qcat.classifier import Classifier

    check_node_calibrations(model_dirs)
    return [Classifier.load(directory, overrides=False) for directory in model_dirs]


def node_answers(classifier, queries: Sequence[str], precision: float) -> list[str | None]:
    """Each query's node answer at ``precision`` (a taxonomy node id), None where there is none."""
    ids = classifier.taxonomy.ids
    return [ids[p] if p >= 0 else None for p in classifier.node_chains(list(queries)).answers(precision).tolist()]


def with_node(listings: list[Listing], node: str | None, taxonomy, fallback) -> list[Listing]:
    """A model's top categories with its node answer marked: the top category it is (``top+node``),
    else a ``leaf-node`` or ``inner-node`` listing after them. ``taxonomy``: the session's (paths
    as the top categories show them); ``fallback``: the model's, for a node the session's lacks."""
    if node is None:
        return listings
    if any(item.listing_id == node for item in listings):
        return [replace(item, answer="top+node") if item.listing_id == node else item for item in listings]
    tree = taxonomy if node in taxonomy else fallback
    path = tree.path_of(node)
    return listings + [Listing(node, path, path, answer="leaf-node" if tree.is_leaf(node) else "inner-node")]


def node_stats(queries: Sequence[QuerySpec], precision: float, model_dirs: Sequence[Path]) -> dict:
    """What the session's settings record of its node answers: the precision and, per model (in
    ``--model`` order), how many queries got a node, of which depths (:func:`qcat.measure.judged.mix_name`),
    and how many nodes were shown beside the top categories (among none of the models' top k)."""
    models = []
    for which, directory in zip(("baseline", "target"), model_dirs):
        mix: Counter = Counter()
        apart = 0
        for q in queries:
            group = q.baseline if which == "baseline" else q.target
            node = next((item for item in group if item.answer in NODE_ANSWERS), None)
            if node is None:
                continue
            mix[mix_name(len(node.category.split(SEPARATOR)), node.answer != "inner-node")] += 1
            apart += node.listing_id not in {item.listing_id for g in (q.baseline, q.target) for item in g
                                             if item.answer in TOP_ANSWERS}
        models.append({"model": str(directory), "queries": len(queries), "answered": sum(mix.values()),
                       "mix": {name: mix[name] for name in MIX_NAMES}, "shown_apart": apart})
    return {"precision": precision, "models": models}


def say_nodes(stats: dict, progress: Callable[[str], None]) -> None:
    """One line per model: how many queries got a node answer at the precision, and how many were shown apart."""
    for entry in stats["models"]:
        mix = ", ".join(f"{n:,} {name}" for name, n in entry["mix"].items() if n)
        progress(f"--precision {stats['precision']:g}: {entry['model']} answers a node for {entry['answered']:,} of "
                 f"{entry['queries']:,} queries" + (f" ({mix})" if mix else "") + f"; {entry['shown_apart']:,} of "
                 "them shown beside the top categories, the others among them")
