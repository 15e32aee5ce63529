"""The hybrid model (eBay §3.1): Naive Bayes for short queries, a long-query model for longer ones.

A query of at most ``cutoff`` tokens goes to NB, any longer one to the long side: XML-Q (the
paper's), XReg (``qcat train hybrid --long-backend xreg``), or both blended. With ``blend`` w > 0
(our addition, chosen on the real-text validation objective) a longer query's score of a
category is ``w · P_nb + (1 − w) · Σ_i s_i · P_long_i`` over the parts' calibrated probabilities
(each part's top ``BLEND_DEPTH``, or top k if larger), where the shares ``s_i`` of the long parts
sum to 1 (one long part: s = 1); w = 0 with one long part is the paper's routing. The hybrid's
own calibration (``calibration.json``, fitted on the queries as routed) maps the result, per
source, to the probability that the category is right. The bundle holds each part's bundle in
``nb/``, ``xmlq/`` and/or ``xreg/``; its manifest records the sha256 of each part's manifest,
and each part verifies its own files, so a change anywhere is caught on load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import MANIFEST, Manifest, read_manifest, sha256_file, write_bundle
from qcat.errors import BundleError, QcatError
from qcat.models.calibration import Calibration, calibrated, calibrated_one, load_calibration, save_calibration
from qcat.models.model import Model, Predictions, top_k_sparse
from qcat.models.nb import NaiveBayesModel
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize

BACKEND = "hybrid"
LONG_BACKENDS = ("xmlq", "xreg")
CUTOFFS = (1, 2, 3, 4)
BLEND_DEPTH = 20  # categories of each part a blended score is summed over (or k, if larger)
BLEND = "blend"  # the source of a blended answer
LONG_SIDE = "long"  # part_for's answer for a query the long side answers


@dataclass(frozen=True)
class HybridModel:
    nb: NaiveBayesModel
    longs: tuple[Model, ...]  # XML-Q and/or XReg: they answer queries longer than the cutoff
    cutoff: int
    taxonomy: Taxonomy
    config: dict
    metrics: dict
    route_to: str = "hybrid"  # or a part's name ("nb", "xmlq", "xreg"): answer every query with that part
    blend: float = 0.0  # NB's weight in the score of a query longer than the cutoff
    long_shares: tuple[float, ...] = (1.0,)  # each long part's share of the other 1 - blend
    calibration: Calibration | None = None
    backend: str = BACKEND

    def __post_init__(self) -> None:
        if self.cutoff not in CUTOFFS:
            raise QcatError(f"the hybrid cutoff must be one of {CUTOFFS}, got {self.cutoff}")
        if not 0 <= self.blend < 1:
            raise QcatError(f"the hybrid's blend weight must lie in [0, 1), got {self.blend}")
        names = [long.backend for long in self.longs]
        if not 1 <= len(names) <= len(LONG_BACKENDS) or len(set(names)) != len(names) \
                or any(name not in LONG_BACKENDS for name in names):
            raise QcatError(f"the hybrid's long parts must be one or two distinct of {', '.join(LONG_BACKENDS)}, "
                            f"not {', '.join(names) or 'none'}")
        if len(self.long_shares) != len(names) or any(not 0 < s <= 1 for s in self.long_shares) \
                or not math.isclose(sum(self.long_shares), 1.0, abs_tol=1e-9):
            raise QcatError(f"the long parts' shares must be positive and sum to 1, one per part; got "
                            f"{list(self.long_shares)} for {', '.join(names)}")
        if self.route_to not in ("hybrid",) + self.parts:
            raise QcatError(f"unknown backend {self.route_to!r} for this hybrid; expected {', '.join(self.parts)} or hybrid")
        labels = list(self.nb.labels)
        for long in self.longs:
            known = set(labels)
            labels += [label for label in long.labels if label not in known]
        position = {label: i for i, label in enumerate(labels)}
        object.__setattr__(self, "labels", tuple(labels))
        object.__setattr__(self, "_from_part", {
            "nb": np.arange(len(self.nb.labels), dtype=np.int32),
            **{long.backend: np.array([position[label] for label in long.labels], dtype=np.int32) for long in self.longs},
        })

    @property
    def parts(self) -> tuple[str, ...]:
        return ("nb",) + tuple(long.backend for long in self.longs)

    @property
    def long_backend(self) -> str:
        """The long side in words: ``xmlq``, ``xreg`` or ``xreg+xmlq``."""
        return "+".join(long.backend for long in self.longs)

    @property
    def blended(self) -> bool:
        """Whether a query the long side answers gets a blend of parts (not one part's answer)."""
        return self.route_to == "hybrid" and (self.blend > 0 or len(self.longs) > 1)

    def weights(self) -> tuple[tuple[str, float], ...]:
        """Each part's weight in a blended score (parts of weight 0 left out)."""
        weights = (("nb", self.blend),) + tuple(
            (long.backend, (1.0 - self.blend) * share) for long, share in zip(self.longs, self.long_shares))
        return tuple((name, weight) for name, weight in weights if weight > 0)

    def mix(self) -> str:
        """The blend in words, e.g. ``0.3 x NB + 0.35 x xreg + 0.35 x xmlq``."""
        return " + ".join(f"{weight:.3g} x {'NB' if name == 'nb' else name}" for name, weight in self.weights())

    def part(self, name: str) -> Model:
        if name == "nb":
            return self.nb
        for long in self.longs:
            if long.backend == name:
                return long
        raise QcatError(f"this hybrid has no part {name!r}; its parts are {', '.join(self.parts)}")

    def with_options(self, cutoff: int | None = None, route_to: str | None = None) -> "HybridModel":
        """The hybrid answering as ``qcat classify --cutoff/--backend`` ask; the bundle's own routing
        stays in ``config`` (:meth:`routed_by_flag` tells them apart)."""
        config = self.config if "route_to" in self.config else self.config | {"route_to": self.route_to}
        return replace(self, cutoff=cutoff or self.cutoff, route_to=route_to or self.route_to, config=config)

    def routed_by_flag(self) -> bool:
        """Whether this hybrid routes otherwise than its bundle does (``--backend`` was given)."""
        return self.route_to != self.config.get("route_to", self.route_to)

    def uncalibrated(self) -> "HybridModel":
        """The same hybrid answering with its parts' raw scores."""
        return replace(self, nb=self.nb.uncalibrated(), longs=tuple(long.uncalibrated() for long in self.longs),
                       calibration=None)

    def part_for(self, tokens: Sequence[str]) -> str:
        """The part that answers a query of these tokens, or :data:`LONG_SIDE` for a blend."""
        if self.route_to != "hybrid":
            return self.route_to
        if len(tokens) <= self.cutoff:
            return "nb"
        return LONG_SIDE if self.blended else self.longs[0].backend

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        sources = [""] * len(queries)
        parts = np.array([self.part_for(tokenize(q)) for q in queries], dtype=object)
        for name in self.parts + (LONG_SIDE,):
            rows = np.nonzero(parts == name)[0]
            if len(rows) == 0:
                continue
            batch = [queries[r] for r in rows]
            if name == LONG_SIDE:
                labels[rows], scores[rows] = self._blended(batch, k)
                part_sources = (BLEND,) * len(rows)
            else:
                part = self.part(name).predict(batch, k)
                labels[rows] = self._labels_of(name, part.labels)
                scores[rows] = part.scores
                part_sources = part.sources
            for r, source in zip(rows, part_sources):
                sources[r] = source
        return calibrated(self.calibration, Predictions(labels, scores, tuple(sources)), queries)

    def predict_one(self, query: str, k: int, known: dict[str, Predictions] | None = None) -> Predictions:
        """``predict([query], k)`` through the parts' compiled single-query paths. ``known``: parts'
        answers to this query already at hand (name -> ``predict_one(query, depth)``), used where
        their depth is the one needed (the re-ranker asks every part first)."""
        from qcat.models import kernels
        def answer(part: str, depth: int) -> Predictions:
            given = (known or {}).get(part)
            if given is not None and given.labels.shape[1] == depth:
                return Predictions(given.labels.copy(), given.scores.copy(), given.sources)
            return self.part(part).predict_one(query, depth)

        name = self.part_for(tokenize(query))
        if name == LONG_SIDE:
            depth = self.blend_depth(k)
            answers = [(part, weight, answer(part, depth)) for part, weight in self.weights()]
            top_labels, top_scores = kernels.blend_top_k(
                np.concatenate([self._labels_of(part, answer.labels[0]) for part, _, answer in answers]),
                np.concatenate([weight * answer.scores[0].astype(np.float64) for _, weight, answer in answers]),
                len(self.labels), k)
            labels = np.full((1, k), -1, dtype=np.int32)
            scores = np.zeros((1, k), dtype=np.float32)
            labels[0, :len(top_labels)], scores[0, :len(top_labels)] = top_labels, top_scores
            predictions = Predictions(labels, scores, (BLEND,))
        else:
            part = answer(name, k)
            predictions = Predictions(self._labels_of(name, part.labels), part.scores, part.sources)
        return calibrated_one(self.calibration, predictions, query)

    @property
    def faster_one_by_one(self) -> bool:
        """As its long parts, when all of them are: they answer most queries of a batch, and cost
        most (the demo hybrid: about 92 µs per query one by one, against 154-273 µs batched)."""
        return all(long.faster_one_by_one for long in self.longs)

    def k_group(self, k: int) -> int:
        """Requests whose k fall in one group can share a call at their largest k, each cut to
        its own: a blended top-k sums over ``blend_depth(k)`` categories of each part, which
        only stays the same while k <= ``BLEND_DEPTH``."""
        return 0 if not self.blended or k <= BLEND_DEPTH else k

    def blend_depth(self, k: int) -> int:
        """How many categories of each part a blended top-k sums over."""
        return max(k, BLEND_DEPTH)

    def _labels_of(self, name: str, part_labels: np.ndarray) -> np.ndarray:
        """A part's label positions as the hybrid's (``-1`` stays)."""
        return np.where(part_labels >= 0, self._from_part[name][np.maximum(part_labels, 0)], -1)

    def _blended(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k of the weighted sum of the parts' scores, over each part's top ``blend_depth(k)``."""
        depth = self.blend_depth(k)
        answers = [(name, weight, self.part(name).predict(queries, depth)) for name, weight in self.weights()]
        row_parts, label_parts, score_parts = [], [], []
        for name, weight, part in answers:
            row, slot = np.nonzero(part.labels >= 0)
            row_parts.append(row)
            label_parts.append(self._from_part[name][part.labels[row, slot]])
            score_parts.append(weight * part.scores[row, slot].astype(np.float64))
        key = np.concatenate(row_parts).astype(np.int64) * len(self.labels) + np.concatenate(label_parts)
        key, inverse = np.unique(key, return_inverse=True)
        row, label = np.divmod(key, len(self.labels))
        return top_k_sparse(row, label, np.bincount(inverse, weights=np.concatenate(score_parts)), len(queries), k)

    def explain(self, query: str, k: int) -> list[str]:
        tokens = tokenize(query)
        part = self.part_for(tokens)
        if self.route_to != "hybrid":
            why = (f"--backend {self.route_to} sends every query to {part}" if self.routed_by_flag() else
                   f"this bundle routes every query to {part} (training kept that part alone)")
            return [f"hybrid: {why}"] + self.part(part).explain(query, k)
        if part != LONG_SIDE:
            relation = "<=" if part == "nb" else ">"
            return [f"hybrid: {len(tokens)} token(s) {relation} cutoff {self.cutoff}, so {part} answers"] \
                + self.part(part).explain(query, k)
        lines = [f"hybrid: {len(tokens)} token(s) > cutoff {self.cutoff}: scores blend {self.mix()} (calibrated "
                 f"probabilities)"]
        for name, _ in self.weights():
            lines += self.part(name).explain(query, k)
        return lines + ["  the blended scores are calibrated again by the hybrid's own map"
                        if self.calibration is not None and BLEND in self.calibration.sources
                        else "  the blended scores are not calibrated again"]

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in self.parts:
            self.part(name).save(directory / name)
        parts = {name: sha256_file(directory / name / MANIFEST) for name in self.parts}
        save_calibration(self.calibration, directory)
        shares = {long.backend: share for long, share in zip(self.longs, self.long_shares)}
        return write_bundle(directory, BACKEND, self.taxonomy, None,
                            self.config | {"cutoff": self.cutoff, "long_backend": self.long_backend, "blend": self.blend,
                                           "long_shares": shares, "route_to": self.route_to},
                            self.metrics, extra={"parts": parts})

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "HybridModel":
        from qcat.models.backends import model_from_manifest  # the parts are bundles of their own

        where = f"model bundle {manifest.directory}"
        recorded = manifest.data.get("parts", {})
        long_names = [name for name in LONG_BACKENDS if name in recorded]
        if "nb" not in recorded or not long_names or len(recorded) != 1 + len(long_names):
            raise BundleError(f"{where}: a hybrid needs parts nb/ and one or both of "
                              f"{', '.join(n + '/' for n in LONG_BACKENDS)}, its manifest lists {sorted(recorded)}")
        shares = manifest.config.get("long_shares", {long_names[0]: 1.0} if len(long_names) == 1 else None)
        if not isinstance(shares, dict) or sorted(shares) != sorted(long_names):
            raise BundleError(f"{where}: long_shares {shares!r} must give a share to each long part "
                              f"({', '.join(long_names)})")
        order = str(manifest.config.get("long_backend", "")).split("+")
        long_names.sort(key=lambda name: order.index(name) if name in order else len(order))
        loaded = {}
        for name in ("nb", *long_names):
            expected = recorded.get(name)
            part_manifest = read_manifest(manifest.directory / name)
            if expected is None or sha256_file(manifest.directory / name / MANIFEST) != expected:
                raise BundleError(f"{where}: part {name}/ does not match its hash in {MANIFEST}")
            if part_manifest.backend != name:
                raise BundleError(f"{where}: part {name}/ holds a {part_manifest.backend} model")
            loaded[name] = model_from_manifest(part_manifest)
        for name, part in loaded.items():
            wrong = [label for label in part.labels
                     if label not in taxonomy or taxonomy.path_of(label) != part.taxonomy.path_of(label)]
            if wrong:
                raise BundleError(f"{where}: part {name}/ names categories "
                                  f"the hybrid's taxonomy lacks or names differently, e.g. {wrong[:3]}")
        try:
            blend = float(manifest.config.get("blend", 0.0))
            long_shares = tuple(float(shares[name]) for name in long_names)
        except (TypeError, ValueError):
            raise BundleError(f"{where}: blend {manifest.config.get('blend')!r} or long_shares {shares!r} "
                              f"is not a number") from None
        try:
            return cls(nb=loaded["nb"], longs=tuple(loaded[name] for name in long_names),
                       cutoff=int(manifest.config.get("cutoff", 1)), taxonomy=taxonomy, config=manifest.config,
                       metrics=manifest.metrics, blend=blend, long_shares=long_shares,
                       route_to=str(manifest.config.get("route_to", "hybrid")), calibration=load_calibration(manifest))
        except QcatError as exc:
            raise BundleError(f"{where}: {exc}") from None
