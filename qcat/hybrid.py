"""The hybrid model (eBay §3.1): Naive Bayes for short queries, a long-query model for longer ones.

A query of at most ``cutoff`` tokens goes to NB, any longer one to the long part: XML-Q (the
paper's) or XReg (``qcat train hybrid --long-backend xreg``). The bundle holds the two part
bundles in ``nb/`` and ``xmlq/`` (or ``xreg/``); its manifest records the sha256 of each
part's manifest, and each part verifies its own files, so a change anywhere is caught on load.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundle import MANIFEST, Manifest, read_manifest, sha256_file, write_bundle
from qcat.errors import BundleError, QcatError
from qcat.model import Model, Predictions
from qcat.nb import NaiveBayesModel
from qcat.normalize import tokenize
from qcat.taxonomy import Taxonomy

BACKEND = "hybrid"
LONG_BACKENDS = ("xmlq", "xreg")
CUTOFFS = (1, 2, 3, 4)


@dataclass(frozen=True)
class HybridModel:
    nb: NaiveBayesModel
    long: Model  # XML-Q or XReg: answers queries longer than the cutoff
    cutoff: int
    taxonomy: Taxonomy
    config: dict
    metrics: dict
    route_to: str = "hybrid"  # or a part's name ("nb", "xmlq"/"xreg"): answer every query with that part
    backend: str = BACKEND

    def __post_init__(self) -> None:
        if self.cutoff not in CUTOFFS:
            raise QcatError(f"the hybrid cutoff must be one of {CUTOFFS}, got {self.cutoff}")
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
            part = self.part(name).predict([queries[r] for r in rows], k)
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
        return [why] + self.part(part).explain(query, k)

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in self.parts:
            self.part(name).save(directory / name)
        parts = {name: sha256_file(directory / name / MANIFEST) for name in self.parts}
        return write_bundle(directory, BACKEND, self.taxonomy, None,
                            self.config | {"cutoff": self.cutoff, "long_backend": self.long.backend},
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
        return cls(nb=loaded["nb"], long=loaded[long_names[0]], cutoff=int(manifest.config.get("cutoff", 1)),
                   taxonomy=taxonomy, config=manifest.config, metrics=manifest.metrics)
