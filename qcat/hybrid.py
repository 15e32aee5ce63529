"""The hybrid model (eBay §3.1): Naive Bayes for short queries, a long-query model for longer ones.

A query of at most ``cutoff`` tokens goes to NB, any longer one to the long part: XML-Q (the
paper's) or XReg (``qcat train hybrid --long-backend xreg``). With ``blend`` w > 0 (our
addition, chosen on the real-text validation objective) a longer query's score of a category
is ``w · P_nb + (1 − w) · P_long`` over the parts' calibrated probabilities (each part's top
``BLEND_DEPTH``, or top k if larger); w = 0 is the paper's routing. The hybrid's own
calibration (``calibration.json``, fitted on the queries as routed) maps the result, per
source, to the probability that the category is right. The bundle holds the two part
bundles in ``nb/`` and ``xmlq/`` (or ``xreg/``); its manifest records the sha256 of each
part's manifest, and each part verifies its own files, so a change anywhere is caught on load.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundle import MANIFEST, Manifest, read_manifest, sha256_file, write_bundle
from qcat.calibration import Calibration, calibrated, calibrated_one, load_calibration, save_calibration
from qcat.errors import BundleError, QcatError
from qcat.model import Model, Predictions, top_k_sparse
from qcat.nb import NaiveBayesModel
from qcat.normalize import tokenize
from qcat.taxonomy import Taxonomy

BACKEND = "hybrid"
LONG_BACKENDS = ("xmlq", "xreg")
CUTOFFS = (1, 2, 3, 4)
BLEND_DEPTH = 20  # categories of each part a blended score is summed over (or k, if larger)
BLEND = "blend"  # the source of a blended answer


@dataclass(frozen=True)
class HybridModel:
    nb: NaiveBayesModel
    long: Model  # XML-Q or XReg: answers queries longer than the cutoff
    cutoff: int
    taxonomy: Taxonomy
    config: dict
    metrics: dict
    route_to: str = "hybrid"  # or a part's name ("nb", "xmlq"/"xreg"): answer every query with that part
    blend: float = 0.0  # NB's weight in the score of a query longer than the cutoff
    calibration: Calibration | None = None
    backend: str = BACKEND

    def __post_init__(self) -> None:
        if self.cutoff not in CUTOFFS:
            raise QcatError(f"the hybrid cutoff must be one of {CUTOFFS}, got {self.cutoff}")
        if not 0 <= self.blend < 1:
            raise QcatError(f"the hybrid's blend weight must lie in [0, 1), got {self.blend}")
        if self.long.backend not in LONG_BACKENDS:
            raise QcatError(f"the hybrid's long part must be one of {', '.join(LONG_BACKENDS)}, not {self.long.backend}")
        if self.route_to not in ("hybrid",) + self.parts:
            raise QcatError(f"unknown backend {self.route_to!r} for this hybrid; expected {', '.join(self.parts)} or hybrid")
        labels = list(self.nb.labels) + [label for label in self.long.labels if label not in set(self.nb.labels)]
        position = {label: i for i, label in enumerate(labels)}
        object.__setattr__(self, "labels", tuple(labels))
        object.__setattr__(self, "_from_part", {
            "nb": np.arange(len(self.nb.labels), dtype=np.int32),
            self.long.backend: np.array([position[label] for label in self.long.labels], dtype=np.int32),
        })

    @property
    def parts(self) -> tuple[str, str]:
        return ("nb", self.long.backend)

    def part(self, name: str) -> Model:
        return self.nb if name == "nb" else self.long

    def with_options(self, cutoff: int | None = None, route_to: str | None = None) -> "HybridModel":
        return replace(self, cutoff=cutoff or self.cutoff, route_to=route_to or self.route_to)

    def uncalibrated(self) -> "HybridModel":
        """The same hybrid answering with its parts' raw scores."""
        return replace(self, nb=self.nb.uncalibrated(), long=self.long.uncalibrated(), calibration=None)

    def part_for(self, tokens: Sequence[str]) -> str:
        if self.route_to != "hybrid":
            return self.route_to
        return "nb" if len(tokens) <= self.cutoff else self.long.backend

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        sources = [""] * len(queries)
        parts = np.array([self.part_for(tokenize(q)) for q in queries], dtype=object)
        for name in self.parts:
            rows = np.nonzero(parts == name)[0]
            if len(rows) == 0:
                continue
            batch = [queries[r] for r in rows]
            if name == self.long.backend and self.blend > 0 and self.route_to == "hybrid":
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

    def predict_one(self, query: str, k: int) -> Predictions:
        """``predict([query], k)`` through the parts' compiled single-query paths."""
        from qcat import kernels

        name = self.part_for(tokenize(query))
        if name == self.long.backend and self.blend > 0 and self.route_to == "hybrid":
            nb, long = (part.predict_one(query, self.blend_depth(k)) for part in (self.nb, self.long))
            top_labels, top_scores = kernels.blend_top_k(
                nb.labels[0], nb.scores[0], self.blend, self._from_part["nb"],
                long.labels[0], long.scores[0], 1.0 - self.blend, self._from_part[self.long.backend], len(self.labels), k)
            labels = np.full((1, k), -1, dtype=np.int32)
            scores = np.zeros((1, k), dtype=np.float32)
            labels[0, :len(top_labels)], scores[0, :len(top_labels)] = top_labels, top_scores
            predictions = Predictions(labels, scores, (BLEND,))
        else:
            part = self.part(name).predict_one(query, k)
            predictions = Predictions(self._labels_of(name, part.labels), part.scores, part.sources)
        return calibrated_one(self.calibration, predictions, query)

    @property
    def faster_one_by_one(self) -> bool:
        """As its long part: it answers most queries of a batch, and costs most (the demo hybrid:
        about 92 µs per query one by one, against 154-273 µs batched)."""
        return self.long.faster_one_by_one

    def k_group(self, k: int) -> int:
        """Requests whose k fall in one group can share a call at their largest k, each cut to
        its own: a blended top-k sums over ``blend_depth(k)`` categories of each part, which
        only stays the same while k <= ``BLEND_DEPTH``."""
        return 0 if self.blend == 0 or self.route_to != "hybrid" or k <= BLEND_DEPTH else k

    def blend_depth(self, k: int) -> int:
        """How many categories of each part a blended top-k sums over."""
        return max(k, BLEND_DEPTH)

    def _labels_of(self, name: str, part_labels: np.ndarray) -> np.ndarray:
        """A part's label positions as the hybrid's (``-1`` stays)."""
        return np.where(part_labels >= 0, self._from_part[name][np.maximum(part_labels, 0)], -1)

    def _blended(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k of ``blend · P_nb + (1 − blend) · P_long`` over each part's top ``BLEND_DEPTH``."""
        depth = self.blend_depth(k)
        return self._blend(self.nb.predict(queries, depth), self.long.predict(queries, depth), len(queries), k)

    def _blend(self, nb: Predictions, long: Predictions, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        row_parts, label_parts, score_parts = [], [], []
        for name, weight, part in (("nb", self.blend, nb), (self.long.backend, 1.0 - self.blend, long)):
            row, slot = np.nonzero(part.labels >= 0)
            row_parts.append(row)
            label_parts.append(self._from_part[name][part.labels[row, slot]])
            score_parts.append(weight * part.scores[row, slot].astype(np.float64))
        key = np.concatenate(row_parts).astype(np.int64) * len(self.labels) + np.concatenate(label_parts)
        key, inverse = np.unique(key, return_inverse=True)
        row, label = np.divmod(key, len(self.labels))
        return top_k_sparse(row, label, np.bincount(inverse, weights=np.concatenate(score_parts)), n, k)

    def explain(self, query: str, k: int) -> list[str]:
        tokens = tokenize(query)
        part = self.part_for(tokens)
        if self.route_to != "hybrid":
            why = f"hybrid: --backend {self.route_to} sends every query to {part}"
        else:
            relation = "<=" if part == "nb" else ">"
            why = f"hybrid: {len(tokens)} token(s) {relation} cutoff {self.cutoff}, so {part} answers"
            if part != "nb" and self.blend > 0:
                why = (f"hybrid: {len(tokens)} token(s) > cutoff {self.cutoff}: scores blend "
                       f"{self.blend:g} x NB + {1 - self.blend:g} x {part} (calibrated probabilities)")
                lines = [why] + self.nb.explain(query, k) + self.long.explain(query, k)
                return lines + ["  the blended scores are calibrated again by the hybrid's own map"
                                if self.calibration is not None and BLEND in self.calibration.sources
                                else "  the blended scores are not calibrated again"]
        return [why] + self.part(part).explain(query, k)

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in self.parts:
            self.part(name).save(directory / name)
        parts = {name: sha256_file(directory / name / MANIFEST) for name in self.parts}
        save_calibration(self.calibration, directory)
        return write_bundle(directory, BACKEND, self.taxonomy, None,
                            self.config | {"cutoff": self.cutoff, "long_backend": self.long.backend, "blend": self.blend},
                            self.metrics, extra={"parts": parts})

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "HybridModel":
        from qcat.classifier import model_from_manifest  # the parts are bundles of their own

        recorded = manifest.data.get("parts", {})
        long_names = [name for name in LONG_BACKENDS if name in recorded]
        if "nb" not in recorded or len(long_names) != 1 or len(recorded) != 2:
            raise BundleError(f"model bundle {manifest.directory}: a hybrid needs parts nb/ and one of "
                              f"{', '.join(n + '/' for n in LONG_BACKENDS)}, its manifest lists {sorted(recorded)}")
        loaded = {}
        for name in ("nb", long_names[0]):
            expected = recorded.get(name)
            part_manifest = read_manifest(manifest.directory / name)
            if expected is None or sha256_file(manifest.directory / name / MANIFEST) != expected:
                raise BundleError(f"model bundle {manifest.directory}: part {name}/ does not match its hash in {MANIFEST}")
            if part_manifest.backend != name:
                raise BundleError(f"model bundle {manifest.directory}: part {name}/ holds a {part_manifest.backend} model")
            loaded[name] = model_from_manifest(part_manifest)
        for name, part in loaded.items():
            wrong = [label for label in part.labels
                     if label not in taxonomy or taxonomy.path_of(label) != part.taxonomy.path_of(label)]
            if wrong:
                raise BundleError(f"model bundle {manifest.directory}: part {name}/ names categories "
                                  f"the hybrid's taxonomy lacks or names differently, e.g. {wrong[:3]}")
        try:
            blend = float(manifest.config.get("blend", 0.0))
        except (TypeError, ValueError):
            raise BundleError(f"model bundle {manifest.directory}: blend {manifest.config.get('blend')!r} is not a number") from None
        return cls(nb=loaded["nb"], long=loaded[long_names[0]], cutoff=int(manifest.config.get("cutoff", 1)),
                   taxonomy=taxonomy, config=manifest.config, metrics=manifest.metrics, blend=blend,
                   calibration=load_calibration(manifest))
