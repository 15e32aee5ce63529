"""A corpus directory: catalog, taxonomy, click log and ``corpus.json`` describing them.

The demo corpus ships in ``training/demo``. ``corpus.json`` names the files and the two
periods of the log: the *base* set (the latest half-year, what models train on) and the
*candidate* set (the half-year before, which augmentation draws from), plus the split
seed and the click threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from qcat.errors import InputError
from qcat.taxonomy import Taxonomy, load_taxonomy
from training.catalog import Catalog, load_catalog
from training.clicklog import IngestResult, ingest
from training.dataset import Dataset

DEMO_DIR = Path(__file__).resolve().parent / "demo"
META_FILE = "corpus.json"
PERIODS = ("base", "candidate", "all")


@dataclass(frozen=True)
class Corpus:
    directory: Path
    meta: dict

    @classmethod
    def open(cls, directory: str | Path | None = None) -> "Corpus":
        directory = Path(directory) if directory is not None else DEMO_DIR
        try:
            meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{directory} is not a corpus: no {META_FILE}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read {directory / META_FILE}: {exc}") from None
        for key in ("catalog", "taxonomy", "log", "periods"):
            if key not in meta:
                raise InputError(f"{directory / META_FILE} lacks {key!r}")
        return cls(directory, meta)

    def path(self, key: str) -> Path:
        return self.directory / self.meta[key]

    def taxonomy(self) -> Taxonomy:
        return load_taxonomy(self.path("taxonomy"))

    def catalog(self) -> Catalog:
        return load_catalog(self.path("catalog"))

    def ingest(self, period: str = "base", taxonomy: Taxonomy | None = None, min_clicks: float | None = None) -> IngestResult:
        """The log of one period, aggregated; ``min_clicks`` overrides the corpus threshold."""
        if period not in PERIODS:
            raise InputError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")
        date_from, date_to = (None, None) if period == "all" else self.meta["periods"][period]
        return ingest(
            self.path("log"),
            taxonomy or self.taxonomy(),
            min_clicks=self.meta.get("min_clicks", 3) if min_clicks is None else min_clicks,
            date_from=date_from,
            date_to=date_to,
        )

    def dataset(self, period: str = "base") -> Dataset:
        taxonomy = self.taxonomy()
        table = self.ingest(period, taxonomy).table
        return Dataset.from_table(table, taxonomy, seed=self.meta.get("split_seed", 0))
