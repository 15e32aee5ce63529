"""The hybrid model (eBay §3.1): Naive Bayes for short queries, XML-Q for longer ones.

A query of at most ``cutoff`` tokens goes to NB, any longer one to XML-Q (the paper uses
cutoff 1). The bundle holds the two part bundles in ``nb/`` and ``xmlq/``; its manifest
records the sha256 of each part's manifest, and each part verifies its own files, so a
change anywhere is caught on load.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundle import MANIFEST, Manifest, read_manifest, sha256_file, write_bundle
from qcat.errors import BundleError, QcatError
from qcat.model import Predictions
from qcat.nb import NaiveBayesModel
from qcat.normalize import tokenize
from qcat.taxonomy import Taxonomy
from qcat.xmlq import XMLQModel

BACKEND = "hybrid"
PARTS = ("nb", "xmlq")
CUTOFFS = (1, 2, 3, 4)


@dataclass(frozen=True)
class HybridModel:
    nb: NaiveBayesModel
    xmlq: XMLQModel
    cutoff: int
    taxonomy: Taxonomy
    config: dict
    metrics: dict
    route_to: str = "hybrid"  # or "nb" / "xmlq": answer every query with that part
    backend: str = BACKEND

    def __post_init__(self) -> None:
        if self.cutoff not in CUTOFFS:
            raise QcatError(f"the hybrid cutoff must be one of {CUTOFFS}, got {self.cutoff}")
        if self.route_to not in ("hybrid",) + PARTS:
            raise QcatError(f"unknown backend {self.route_to!r}; expected nb, xmlq or hybrid")
        labels = list(self.nb.labels) + [label for label in self.xmlq.labels if label not in set(self.nb.labels)]
        position = {label: i for i, label in enumerate(labels)}
        object.__setattr__(self, "labels", tuple(labels))
        object.__setattr__(self, "_from_part", {
            "nb": np.arange(len(self.nb.labels), dtype=np.int32),
            "xmlq": np.array([position[label] for label in self.xmlq.labels], dtype=np.int32),
        })

    def with_options(self, cutoff: int | None = None, route_to: str | None = None) -> "HybridModel":
        return replace(self, cutoff=cutoff or self.cutoff, route_to=route_to or self.route_to)

    def part_for(self, tokens: Sequence[str]) -> str:
        if self.route_to != "hybrid":
            return self.route_to
        return "nb" if len(tokens) <= self.cutoff else "xmlq"

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        sources = [""] * len(queries)
        parts = np.array([self.part_for(tokenize(q)) for q in queries], dtype=object)
        for name in PARTS:
            rows = np.nonzero(parts == name)[0]
            if len(rows) == 0:
                continue
            part = getattr(self, name).predict([queries[r] for r in rows], k)
            labels[rows] = np.where(part.labels >= 0, self._from_part[name][np.maximum(part.labels, 0)], -1)
            scores[rows] = part.scores
            for r, source in zip(rows, part.sources):
                sources[r] = source
        return Predictions(labels, scores, tuple(sources))

    def explain(self, query: str, k: int) -> list[str]:
        tokens = tokenize(query)
        part = self.part_for(tokens)
        if self.route_to != "hybrid":
            why = f"hybrid: --backend {self.route_to} sends every query to {part}"
        else:
            relation = "<=" if part == "nb" else ">"
            why = f"hybrid: {len(tokens)} token(s) {relation} cutoff {self.cutoff}, so {part} answers"
        return [why] + getattr(self, part).explain(query, k)

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.nb.save(directory / "nb")
        self.xmlq.save(directory / "xmlq")
        parts = {name: sha256_file(directory / name / MANIFEST) for name in PARTS}
        return write_bundle(directory, BACKEND, self.taxonomy, None, self.config | {"cutoff": self.cutoff},
                            self.metrics, extra={"parts": parts})

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "HybridModel":
        from qcat.classifier import model_from_manifest  # the parts are bundles of their own

        loaded = {}
        for name in PARTS:
            expected = manifest.data.get("parts", {}).get(name)
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
        return cls(nb=loaded["nb"], xmlq=loaded["xmlq"], cutoff=int(manifest.config.get("cutoff", 1)),
                   taxonomy=taxonomy, config=manifest.config, metrics=manifest.metrics)
