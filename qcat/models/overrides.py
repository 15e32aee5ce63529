"""Judged overrides: a judged query's exact categories served first, as a search engine's query rules.

A bundle trained with ``qcat train ... --judged FILE --overrides`` holds ``overrides.tsv``: a header
line ``query<TAB>categories``, then one line per normalized query, its categories judged Exact
(grade 3) after it, tab-separated, best first. The file is listed and hashed in the manifest like
every other file, so a modified one is refused on load.

:class:`OverriddenModel` wraps any model (every backend, through the one :class:`qcat.models.model.Model`
protocol): a query whose normalized form has an override is answered with its judged categories
first, at score :data:`JUDGED_SCORE`, then the model's own answers to it that are not among them
(deduplicated, in the model's order and scores), with source :data:`JUDGED`; every other query
is answered by the model alone, unchanged. The lookup is one dict access of the normalized
query (the tokenizer's cache makes normalizing it again downstream free).

:meth:`qcat.classifier.Classifier.load` applies a bundle's overrides (``overrides=False``,
``--no-overrides``: the model alone); :func:`qcat.classifier.load_model`, which evaluation and
training use, gives the model alone unless asked, so measuring a bundle measures its model, not
its rules. Only the top-level bundle's file counts: a hybrid's part loaded on its own
(``--model DIR/nb``) has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from qcat.bundles.bundle import Manifest, load_lines
from qcat.errors import BundleError, InputError, shown
from qcat.models.model import Model, Predictions
from qcat.text.normalize import NORMALIZER, normalize

OVERRIDES_FILE = "overrides.tsv"
HEADER = "query\tcategories"
JUDGED = "judged"  # the source of an overridden answer
JUDGED_SCORE = 1.0  # a judged-Exact category's score: people judged it right


def check_overrides(overrides: Mapping[str, Sequence[str]], labels: Sequence[str],
                    where: str = "--overrides") -> dict[str, tuple[str, ...]]:
    """``overrides`` (normalized query -> its judged-exact categories, best first) as they are
    saved, or an InputError naming the query or category: every query in normalized form,
    every category one of the model's ``labels``, at least one per query, none twice."""
    known = set(labels)
    checked = {}
    for query, categories in overrides.items():
        if not isinstance(query, str) or not query or normalize(query) != query:
            raise InputError(f"{where}: query {shown(query)} is not a normalized query "
                             f"(it normalizes to {shown(normalize(query) if isinstance(query, str) else '')})")
        categories = tuple(categories) if not isinstance(categories, str) else (categories,)
        if not categories:
            raise InputError(f"{where}: query {shown(query)} has no category")
        for category in categories:
            if category not in known:
                raise InputError(f"{where}: query {shown(query)}: category {shown(category)} is not one of the "
                                 f"model's {len(known):,} categories")
        if len(set(categories)) != len(categories):
            raise InputError(f"{where}: query {shown(query)} names a category twice: {shown(list(categories))}")
        checked[query] = categories
    return checked


def save_overrides(directory: str | Path, overrides: Mapping[str, Sequence[str]], labels: Sequence[str]) -> int:
    """Write ``overrides.tsv`` into a bundle directory before its manifest is written (so the
    manifest hashes it); returns how many queries it holds."""
    checked = check_overrides(overrides, labels)
    lines = [HEADER] + ["\t".join((query,) + categories) for query, categories in sorted(checked.items())]
    (Path(directory) / OVERRIDES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(checked)


def has_overrides(manifest: Manifest) -> bool:
    return OVERRIDES_FILE in manifest.data["files"]


def load_overrides(manifest: Manifest) -> dict[str, tuple[str, ...]]:
    """The bundle's overrides (verified with its other files by ``read_manifest``); empty if it has none."""
    if not has_overrides(manifest):
        return {}
    where = _where(manifest)
    lines = load_lines(manifest, OVERRIDES_FILE) or [""]
    if lines[0] != HEADER:
        raise BundleError(f"{where}: the first line must be the header {HEADER!r}, not {shown(lines[0])}")
    overrides = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        query, *categories = line.split("\t")
        if query in overrides:
            raise BundleError(f"{where}: line {number}: query {shown(query)} is listed twice")
        overrides[query] = tuple(categories)
    if manifest.data.get("normalizer", 1) != NORMALIZER:
        return _refolded(overrides, where)
    return overrides


def _refolded(overrides: dict[str, tuple[str, ...]], where: str) -> dict[str, tuple[str, ...]]:
    """The overrides of a bundle saved under an older query normalizer, keyed by today's normal form:
    what was one query to a person ("men's", "mens") is one, its judged categories merged in order."""
    folded: dict[str, tuple[str, ...]] = {}
    for query, categories in overrides.items():
        key = normalize(query)
        if not key:
            raise BundleError(f"{where}: query {shown(query)} normalizes to nothing under this qcat's normalizer")
        folded[key] = tuple(dict.fromkeys(folded.get(key, ()) + categories))
    return folded


def _where(manifest: Manifest) -> str:
    """What an error about a bundle's overrides names: the bundle and its file, once."""
    return f"model bundle {manifest.directory}: {OVERRIDES_FILE}"


def with_overrides(model: Model, manifest: Manifest) -> Model:
    """``model`` answering the bundle's overrides first, or ``model`` itself if it has none."""
    if not has_overrides(manifest):
        return model
    where = _where(manifest)
    try:  # the file named once (issue 53 item 13b: it was `overrides.tsv: overrides.tsv: ...`)
        return OverriddenModel(model, load_overrides(manifest), where=where)
    except InputError as exc:
        raise BundleError(str(exc)) from None


class OverriddenModel:
    """A model whose overridden queries are answered with their judged categories first.

    Implements :class:`qcat.models.model.Model`; every other attribute (a hybrid's ``parts``, ``cutoff``,
    ``taxonomy``, ``calibration``...) is the wrapped model's, so callers that look at a backend's
    own settings see them unchanged."""

    def __init__(self, model: Model, overrides: Mapping[str, Sequence[str]], where: str = "overrides") -> None:
        """``where``: what an error names (the bundle's file, for overrides read from one)."""
        self.model = model
        self.backend = model.backend
        self.labels = model.labels
        self.overrides = check_overrides(overrides, model.labels, where)
        position = {label: i for i, label in enumerate(model.labels)}
        self._judged = {query: tuple(position[c] for c in categories) for query, categories in self.overrides.items()}
        self.most = max((len(c) for c in self.overrides.values()), default=0)

    def __getattr__(self, name: str):
        if name == "model":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def categories(self) -> int:
        """How many distinct categories the overrides name."""
        return len({c for categories in self.overrides.values() for c in categories})

    def judged(self, query: str) -> tuple[int, ...] | None:
        """The judged categories' label positions of a raw query, or None where it has no override."""
        return self._judged.get(normalize(query))

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        judged = [self._judged.get(normalize(q)) for q in queries]
        hit = [i for i, positions in enumerate(judged) if positions is not None]
        if not hit:
            return self.model.predict(queries, k)
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        sources = [JUDGED] * len(queries)
        rest = [i for i, positions in enumerate(judged) if positions is None]
        if rest:
            own = self.model.predict([queries[i] for i in rest], k)
            width = min(k, own.labels.shape[1])
            labels[rest, :width], scores[rest, :width] = own.labels[:, :width], own.scores[:, :width]
            for i, source in zip(rest, own.sources):
                sources[i] = source
        for depth in sorted({k + len(judged[i]) for i in hit}):  # one call per depth: most share one
            rows = [i for i in hit if k + len(judged[i]) == depth]
            own = self.model.predict([queries[i] for i in rows], depth)
            for row, i in enumerate(rows):
                labels[i], scores[i] = _merged(judged[i], own.labels[row], own.scores[row], k)
        return Predictions(labels, scores, tuple(sources))

    def predict_one(self, query: str, k: int) -> Predictions:
        positions = self._judged.get(normalize(query))
        if positions is None:
            return self.model.predict_one(query, k)
        own = self.model.predict_one(query, k + len(positions))
        labels, scores = _merged(positions, own.labels[0], own.scores[0], k)
        return Predictions(np.array([labels], dtype=np.int32), np.array([scores], dtype=np.float32), (JUDGED,))

    @property
    def faster_one_by_one(self) -> bool:
        return self.model.faster_one_by_one

    def k_group(self, k: int) -> int:
        """The wrapped model's group for the deepest answer an override asks of it (k plus its
        judged categories), so that a shared call still answers each k as on its own."""
        return self.model.k_group(k + self.most)

    def with_options(self, **options) -> OverriddenModel:
        return OverriddenModel(self.model.with_options(**options), self.overrides)

    def uncalibrated(self) -> OverriddenModel:
        return OverriddenModel(self.model.uncalibrated(), self.overrides)

    def explain(self, query: str, k: int) -> list[str]:
        key = normalize(query)
        categories = self.overrides.get(key)
        if categories is None:
            return self.model.explain(query, k)
        taxonomy = getattr(self.model, "taxonomy", None)
        named = ", ".join(f"{c} ({taxonomy.path_of(c)})" if taxonomy is not None else c for c in categories)
        line = (f"judged override: {shown(key)} was judged Exact for {named}; served first at score "
                f"{JUDGED_SCORE:.1f} (source: {JUDGED}), then the model's own answers below, without those")
        return [line] + self.model.explain(query, k)

    def save(self, directory: str | Path):
        """The wrapped model's bundle with ``overrides.tsv`` beside its files (hashed by its manifest)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_overrides(directory, self.overrides, self.labels)
        return self.model.save(directory)


def _merged(judged: tuple[int, ...], own_labels: np.ndarray, own_scores: np.ndarray, k: int) -> tuple[list, list]:
    """One row, k wide (padded ``-1``/0): the judged categories at :data:`JUDGED_SCORE`, then the
    model's own answers that are not among them, in order. Plain lists: a row is a handful of
    numbers, where numpy's set operations and slice assignments cost microseconds each."""
    labels, scores = list(judged[:k]), [JUDGED_SCORE] * min(len(judged), k)
    for label, score in zip(own_labels.tolist(), own_scores.tolist()):
        if len(labels) == k:
            break
        if label >= 0 and label not in judged:
            labels.append(label)
            scores.append(score)
    pad = k - len(labels)
    return labels + [-1] * pad, scores + [0.0] * pad
