"""Training data with a catalog (``qcat train ... --catalog FILE``): a corpus or click log plus
the catalog's pairs, or the catalog alone (cold start).

:class:`CatalogData` reads like a corpus (``split_set``, ``real_sets``, ``query_set``) so the
validation objective (:func:`qcat.training.selection.objective.validation_sets`) is built the same way, and
gives one :class:`qcat.training.data.dataset.Dataset` per catalog setting (:mod:`qcat.training.catalog.source`):
the validation and test splits never depend on the setting, so settings compare fairly.

For a corpus with held-out listings (the demo's real-text sets), the held-out listings never
train: a catalog listing with a held-out id is left out, and so is every pair whose text is a
held-out title or any short form of one (every rule), counted in the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.text.normalize import normalize
from qcat.training.catalog.ingest import CatalogReport, Listings, ingest_catalog
from qcat.training.catalog.short_forms import RULES, category_pairs, short_forms
from qcat.training.catalog.source import (
    CatalogPairs,
    CatalogSettings,
    cold_start,
    cold_start_dataset,
    cold_start_split,
    with_log,
)
from qcat.training.data.dataset import Dataset


def held_out_listings(corpus) -> tuple[frozenset[str], Listings | None]:
    """The ids and the (normalized) listings a corpus holds out for its real-text sets."""
    if not getattr(corpus, "meta", {}).get("holdout"):
        return frozenset(), None
    catalog = corpus.catalog()
    held = corpus.holdout_split(catalog) != 0
    taxonomy = corpus.taxonomy()
    listings = Listings(listing_id=catalog.listing_id[held],
                        title=np.asarray([normalize(t) for t in catalog.title[held]], dtype=object),
                        brand=np.asarray([normalize(b) for b in catalog.brand[held]], dtype=object),
                        category=np.asarray([taxonomy.id_of_path(p) for p in catalog.category_path[held]], dtype=object),
                        popularity=catalog.popularity[held])
    return frozenset(listings.listing_id.tolist()), listings


def held_out_texts(held: Listings, training: Listings) -> frozenset[str]:
    """Every text a held-out listing could be asked as: its title and all its short forms, by
    every rule; ``catgram`` forms both with the training listings' frequent pairs (as training
    cuts them) and with those of all listings (as if the held-out ones were counted too)."""
    texts = set(held.title.tolist())
    everyone = np.concatenate([training.title, held.title]), np.concatenate([training.category, held.category])
    for frequent in (category_pairs(training.title, training.category), category_pairs(*everyone)):
        forms = short_forms(held.title, held.brand, held.category, RULES, frequent=frequent)
        for per_listing in forms.values():
            for listing_forms in per_listing:
                texts.update(listing_forms)
    return frozenset(t for t in texts if t)


@dataclass
class CatalogData:
    """``base`` (a :class:`qcat.training.data.corpus.Corpus` or :class:`qcat.training.data.corpus.LogCorpus`, or None for
    a catalog alone with ``taxonomy_path``) plus the catalog file."""

    catalog: Path
    base: object | None = None
    taxonomy_path: Path | None = None
    catalog_only: bool = False
    split_seed: int = 0
    internal_nodes: str = "other"
    period: str = "base"
    _loaded: dict = field(default_factory=dict, repr=False)

    @property
    def split_set(self) -> str:
        return "catalog" if self.catalog_only else getattr(self.base, "split_set", "simulated")

    @property
    def directory(self) -> Path:
        return self.base.directory if self.base is not None else self.catalog

    def real_sets(self) -> tuple[str, ...]:
        return self.base.real_sets() if self.base is not None else ()

    def query_set(self, name: str, split: str, taxonomy=None):
        return self.base.query_set(name, split, taxonomy)

    def taxonomy(self):
        from qcat.taxonomy import load_taxonomy

        return self.base.taxonomy() if self.base is not None else load_taxonomy(self.taxonomy_path)

    def base_dataset(self) -> Dataset | None:
        """The corpus's or log's dataset (None for a catalog alone)."""
        if self.base is None:
            return None
        if "base" not in self._loaded:
            self._loaded["base"] = self.base.dataset(self.period) if self.period else self.base.dataset()
        return self._loaded["base"]

    def prepare(self) -> tuple[CatalogPairs, CatalogReport]:
        """Ingest the catalog (once) into its training pairs, held-out listings and texts left out."""
        if "pairs" in self._loaded:
            return self._loaded["pairs"]
        base = self.base_dataset()
        taxonomy = base.taxonomy if base is not None else self.taxonomy()
        listings, report, taxonomy = ingest_catalog(self.catalog, taxonomy, internal_nodes=self.internal_nodes)
        self._loaded["taxonomy"] = taxonomy
        held_ids, held = held_out_listings(self.base) if self.base is not None else (frozenset(), None)
        is_held = np.fromiter((i in held_ids for i in listings.listing_id), dtype=bool, count=len(listings))
        training = listings.subset(~is_held)
        left_out = {"held_out_listings": int(is_held.sum())}
        trains = training.subset(cold_start_split(training, self.split_seed) == 0) if self.catalog_only else training
        exclude = held_out_texts(held, trains) if held is not None else frozenset()
        if self.catalog_only:
            source, held_table = cold_start(training, self.split_seed, exclude, left_out)
            self._loaded["held_table"] = held_table
        else:
            source = CatalogPairs.build(training, exclude, left_out)
        self._loaded["pairs"] = source, report
        return source, report

    def dataset(self, settings: CatalogSettings = CatalogSettings()) -> tuple[Dataset, dict]:
        """The dataset of one catalog setting and the counts of its pairs."""
        source, _ = self.prepare()
        if self.catalog_only:
            dataset, counts = cold_start_dataset(source, self._loaded["held_table"], self._loaded["taxonomy"],
                                                 self.split_seed, settings)
        else:
            base = self.base_dataset()
            dataset, counts = with_log(base, source, settings)
            dataset = Dataset(self._loaded["taxonomy"], dataset.table, dataset.split, dataset.seed)
        return dataset, counts | source.left_out

    def record(self, report: CatalogReport, settings: CatalogSettings, counts: dict, table: list[dict],
               chosen_by: str = "validation objective") -> dict:
        """The manifest's record of the catalog: file, hash, rows, settings, how they were set (``chosen_by``:
        the validation objective over ``selection``, the settings tried; or ``flags``, one setting given)."""
        from qcat.training.data.provenance import catalog_source

        return catalog_source(self.catalog, self.base, self.catalog_only) | {
            "ingest": report.as_dict(), "settings": settings.as_dict(), "pairs": counts, "chosen_by": chosen_by,
            "selection": table}

    def fit(self, fit_one, sets, fixed: dict, name: str, log=print) -> tuple[object, Dataset, dict]:
        """``fit_one(dataset, sets) -> model`` once per catalog setting (:func:`qcat.training.catalog.source.choose`:
        ``fixed`` settings are not varied), keeping the best on the validation objective ``sets``;
        returns the model, its dataset and the manifest's record of the catalog."""
        from qcat.training.catalog.source import candidates, choose
        from qcat.training.selection.objective import objective

        def fit(settings):
            model = fit_one(self.dataset(settings)[0], sets)
            return model, objective(model, sets)[0]

        titles, shorts, _ = candidates(fixed)
        if len(titles) == 1 and len(shorts) == 1:  # every setting given (or short forms weigh 0): one fit
            model, settings, table = choose(fit, fixed)
            dataset, counts = self.dataset(settings)
            chosen = settings.as_dict()
            log(f"{name}: catalog settings fixed by flags: title weight {chosen['title_weight']:g}, short weight "
                f"{chosen['short_weight']:g}, rules {', '.join(chosen['rules']) or 'none'} (validation objective "
                f"{table[0]['objective']:.4f}; {counts['pairs_used']:,} catalog pairs used, "
                f"{counts['pairs_left_out']:,} left out)")
            return model, dataset, self.record(self.prepare()[1], settings, counts, table, chosen_by="flags")
        log(f"catalog settings ({name}): title weight / short weight / rules -> validation objective")
        model, settings, table = choose(fit, fixed, progress=lambda row: log(
            f"  catalog {row['title_weight']:g} / {row['short_weight']:g} / {','.join(row['rules']) or '-'}: "
            f"{row['objective']:.4f}"))
        dataset, counts = self.dataset(settings)
        chosen = settings.as_dict()
        log(f"{name}: chose catalog title weight {chosen['title_weight']:g}, short weight {chosen['short_weight']:g}, "
            f"rules {', '.join(chosen['rules']) or 'none'} ({counts['pairs_used']:,} catalog pairs used, "
            f"{counts['pairs_left_out']:,} left out)")
        return model, dataset, self.record(self.prepare()[1], settings, counts, table)
