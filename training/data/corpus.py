"""A corpus directory: catalog, taxonomy, click log and ``corpus.json`` describing them.

The demo corpus ships in the qcat-demo distribution (``demo/qcat_demo/corpus``). ``corpus.json`` names the files and the two
periods of the log: the *base* set (the latest half-year, what models train on) and the
*candidate* set (the half-year before, which augmentation draws from), plus the split
seed and the click threshold. Optionally, the real-text query sets
(:mod:`qcat.training.data.real_text`): ``holdout`` (``{"fraction", "seed"}``: the listings kept from the
simulator, whose titles make ``real-title`` and ``real-2tok``) and ``real_queries`` (a CSV of
real queries with their categories).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.bundles.demo import demo_corpus_dir
from qcat.errors import InputError
from qcat.taxonomy import Taxonomy, load_taxonomy
from qcat.training.clicklogs.clicklog import IngestResult
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.clicklogs.ingest_cache import cached_ingest
from qcat.training.data.dataset import Dataset
from qcat.training.data.listings import Catalog, load_catalog

META_FILE = "corpus.json"
PERIODS = ("base", "candidate", "all")


@dataclass(frozen=True)
class Corpus:
    directory: Path
    meta: dict
    _loaded: dict = field(default_factory=dict, compare=False, repr=False)  # catalog, read once

    @classmethod
    def open(cls, directory: str | Path | None = None) -> "Corpus":
        directory = Path(directory) if directory is not None else demo_corpus_dir()
        try:
            meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{directory} is not a corpus: no {META_FILE}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read {directory / META_FILE}: {exc}") from None
        where = directory / META_FILE
        if not isinstance(meta, dict):
            raise InputError(f"{where} is not a JSON object")
        for key in ("taxonomy", "log", "periods"):
            if key not in meta:
                raise InputError(f"{where} lacks {key!r} (to evaluate a click log without a corpus, use "
                                 f"--log FILE --taxonomy FILE)")
        periods = meta["periods"]
        for period in PERIODS[:2]:
            span = periods.get(period) if isinstance(periods, dict) else None
            if not (isinstance(span, list) and len(span) == 2 and all(isinstance(d, str) for d in span)):
                raise InputError(f"{where}: periods needs {period!r} as [\"YYYY-MM-DD\", \"YYYY-MM-DD\"] "
                                 f"(from, to), got {span!r}")
        return cls(directory, meta)

    def source(self, period: str) -> dict:
        """What a report says the data was."""
        return {"corpus": str(self.directory), "period": period}

    def path(self, key: str) -> Path:
        return self.directory / self.meta[key]

    def taxonomy(self) -> Taxonomy:
        return load_taxonomy(self.path("taxonomy"))

    def catalog(self) -> Catalog:
        """The corpus's catalog, read on first use (every real-text set is built from it)."""
        if "catalog" not in self._loaded:
            self._loaded["catalog"] = load_catalog(self.path("catalog"))
        return self._loaded["catalog"]

    def ingest(self, period: str = "base", taxonomy: Taxonomy | None = None, min_clicks: float | None = None) -> IngestResult:
        """The log of one period, aggregated; ``min_clicks`` overrides the corpus threshold."""
        if period not in PERIODS:
            raise InputError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")
        date_from, date_to = (None, None) if period == "all" else self.meta["periods"][period]
        return cached_ingest(
            self.path("log"),
            taxonomy or self.taxonomy(),
            min_clicks=self.meta.get("min_clicks", 3) if min_clicks is None else min_clicks,
            date_from=date_from,
            date_to=date_to,
            internal_nodes=self.internal_nodes,
        )

    @property
    def internal_nodes(self) -> str:
        """The rule for log rows naming a non-leaf category (:mod:`qcat.training.clicklogs.clicklog`)."""
        return self.meta.get("internal_nodes", "other")

    def holdout_split(self, catalog: Catalog | None = None) -> np.ndarray:
        """Per catalog listing: 0 = given to the simulator, 1/2 = held out for validation/test."""
        from qcat.training.data.real_text import holdout_split

        catalog = catalog or self.catalog()
        holdout = self.meta.get("holdout")
        if not holdout:
            return np.zeros(len(catalog), dtype=np.int8)
        return holdout_split(catalog, float(holdout["fraction"]), int(holdout.get("seed", 0)))

    def real_sets(self) -> tuple[str, ...]:
        """The real-text query sets this corpus has (none for a corpus without them)."""
        from qcat.training.data.real_text import REAL_SETS, TITLE_SETS

        return (TITLE_SETS if self.meta.get("holdout") else ()) + (REAL_SETS[2:] if self.meta.get("real_queries") else ())

    def query_set(self, name: str, split: str, taxonomy: Taxonomy | None = None) -> ClickTable:
        """A real-text query set: ``real-title`` / ``real-2tok`` of the held-out listings of
        ``split`` (validation or test), or all of ``real-queries`` (too small to split)."""
        from qcat.training.data.real_text import HOLDOUT_SPLITS, load_real_queries, title_set

        if name not in self.real_sets():
            raise InputError(f"corpus {self.directory} has no query set {name!r}; it has "
                             f"{', '.join(self.real_sets()) or 'none'}")
        taxonomy = taxonomy or self.taxonomy()
        if name == "real-queries":
            return load_real_queries(self.path("real_queries"), taxonomy)
        if split not in HOLDOUT_SPLITS:
            raise InputError(f"the {name} set has splits {' and '.join(HOLDOUT_SPLITS)}, not {split!r}")
        catalog = self.catalog()
        return title_set(catalog, taxonomy, self.holdout_split(catalog), name, split)

    def confusable(self):
        """The confusable map that ships with the corpus (``qcat data audit`` on its base period's
        training split, ``"confusable"`` in corpus.json), or None."""
        from qcat.taxonomy.confusable import load_confusable

        return load_confusable(self.path("confusable"), self.taxonomy()) if self.meta.get("confusable") else None

    def dataset(self, period: str = "base") -> Dataset:
        result = self.ingest(period, self.taxonomy())
        return Dataset.from_table(result.table, result.taxonomy, seed=self.meta.get("split_seed", 0))


@dataclass(frozen=True)
class LogCorpus:
    """A user's click log and taxonomy read like a corpus (``--log FILE --taxonomy FILE``): one
    period (the whole log), the seeded train/validation/test split by query, and no real-text
    query sets. ``qcat train --log`` and ``qcat evaluate --log`` both read data through it, so a
    model trained on a log is evaluated on the test queries of its own split."""

    log: Path
    taxonomy_path: Path
    min_clicks: float = 3
    split_seed: int = 0
    internal_nodes: str = "other"
    _loaded: dict = field(default_factory=dict, compare=False, repr=False)
    split_set = "log"  # the name model choices give its validation split (qcat.training.selection.objective)

    @property
    def directory(self) -> Path:
        return self.log

    def source(self, period: str) -> dict:
        return {"corpus": f"{self.log} (click log)", "period": "whole log", "log": str(self.log),
                "taxonomy": str(self.taxonomy_path), "min_clicks": self.min_clicks, "split_seed": self.split_seed,
                "internal_nodes": self.internal_nodes}

    def taxonomy(self) -> Taxonomy:
        if "taxonomy" not in self._loaded:
            self._loaded["taxonomy"] = load_taxonomy(self.taxonomy_path)
        return self._loaded["taxonomy"]

    def ingest(self, period: str = "all", taxonomy: Taxonomy | None = None, min_clicks: float | None = None) -> IngestResult:
        """The whole log, aggregated (read once for the log's own threshold)."""
        threshold = self.min_clicks if min_clicks is None else min_clicks
        key = ("ingest", threshold)
        if key not in self._loaded:
            self._loaded[key] = cached_ingest(self.log, taxonomy or self.taxonomy(), min_clicks=threshold,
                                              internal_nodes=self.internal_nodes)
        return self._loaded[key]

    def real_sets(self) -> tuple[str, ...]:
        return ()

    def query_set(self, name: str, split: str, taxonomy: Taxonomy | None = None) -> ClickTable:
        raise InputError(f"a click log has no real-text query set {name!r}; its own test split is reported "
                         f"by head/torso/tail")

    def dataset(self, period: str = "all") -> Dataset:
        result = self.ingest()
        return Dataset.from_table(result.table, result.taxonomy, seed=self.split_seed)
