"""The harness's inventory (eBay §4.2.2): every listing of the golden set plus a sample of
the catalog (10% by default), so that judged listings compete with unjudged ones.

A judged listing that is not in the catalog has no title to search: it is *unsearchable*,
counted and reported, and no system can return it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qcat.errors import InputError
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize
from qcat.training.data.listings import Catalog


@dataclass(frozen=True)
class Inventory:
    listing_id: np.ndarray  # object
    title: np.ndarray  # object
    tokens: list[list[str]]  # normalized title tokens
    category: np.ndarray  # object: taxonomy id of each listing
    golden_listings: int  # judged listings found in the catalog
    sampled_listings: int  # catalog listings added by the sample (not judged)
    unsearchable: np.ndarray  # object: judged listing ids missing from the catalog
    sample_fraction: float

    def __len__(self) -> int:
        return len(self.listing_id)

    def summary(self) -> dict:
        return {
            "listings": len(self),
            "golden_listings": self.golden_listings,
            "sampled_listings": self.sampled_listings,
            "sample_fraction": self.sample_fraction,
            "unsearchable_golden_listings": int(len(self.unsearchable)),
        }


def build_inventory(catalog: Catalog, taxonomy: Taxonomy, golden_listing_ids: np.ndarray,
                    sample_fraction: float = 0.1, seed: int = 0) -> Inventory:
    if not 0 <= sample_fraction <= 1:
        raise InputError(f"inventory sample fraction must lie in [0, 1], got {sample_fraction}")
    judged = set(np.asarray(golden_listing_ids, dtype=object).tolist())
    in_catalog = np.fromiter((listing in judged for listing in catalog.listing_id), dtype=bool, count=len(catalog))
    unsearchable = np.array(sorted(judged - set(catalog.listing_id.tolist())), dtype=object)
    rng = np.random.default_rng(seed)
    sampled = (rng.random(len(catalog)) < sample_fraction) & ~in_catalog
    keep = np.nonzero(in_catalog | sampled)[0]
    category = np.array([taxonomy.id_of_path(p) for p in catalog.category_path[keep]], dtype=object)
    unknown = np.nonzero([c is None for c in category])[0]
    if len(unknown):
        raise InputError(f"catalog listing {catalog.listing_id[keep[unknown[0]]]!r}: category "
                         f"{catalog.category_path[keep[unknown[0]]]!r} is not in the taxonomy")
    return Inventory(
        listing_id=catalog.listing_id[keep],
        title=catalog.title[keep],
        tokens=[tokenize(t) for t in catalog.title[keep]],
        category=category,
        golden_listings=int(in_catalog.sum()),
        sampled_listings=int(sampled.sum()),
        unsearchable=unsearchable,
        sample_fraction=sample_fraction,
    )
