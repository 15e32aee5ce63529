"""Product catalogs: listings with a title, brand, leaf category path and popularity."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qcat.inputs import COMMENTS_NONE, Column, FileSchema, read_table
from qcat.taxonomy import OTHER_LEAF, Taxonomy, from_paths

REQUIRED_COLUMNS = ("listing_id", "title", "category_path")


@dataclass(frozen=True)
class Catalog:
    """Listings as parallel arrays. ``popularity`` is NaN where the source has none."""

    listing_id: np.ndarray
    source: np.ndarray
    title: np.ndarray
    brand: np.ndarray
    category_path: np.ndarray
    popularity: np.ndarray
    price: np.ndarray

    def __len__(self) -> int:
        return len(self.listing_id)

    def taxonomy(self) -> Taxonomy:
        """The tree of every category path the listings carry (each prefix is a node)."""
        return from_paths(sorted(set(self.category_path.tolist())))

    def subset(self, keep: np.ndarray) -> "Catalog":
        """The listings where ``keep`` is true, in catalog order."""
        return Catalog(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})


def leaf_category_paths(paths: np.ndarray) -> np.ndarray:
    """Every listing on a leaf: a path that is also the prefix of another listing's path
    (an internal node of the tree) becomes its ``Other`` child, ``A > B`` -> ``A > B > Other``.

    Source catalogs are not perfectly leaf-only; a classifier must still answer leaves only.
    """
    distinct = set(paths.tolist())
    internal = {" > ".join(p.split(" > ")[:d]) for p in distinct for d in range(1, p.count(" > ") + 1)} & distinct
    return np.array([f"{p} > {OTHER_LEAF}" if p in internal else p for p in paths.tolist()], dtype=object)


CATALOG_FILE = FileSchema(
    kind="catalog", flag="--catalog", delimiter=",", comments=COMMENTS_NONE, match_queries=False,
    columns=(Column("listing_id", "text", True, "the listing's id"),
             Column("source", "text", False, "the retailer it comes from"),
             Column("title", "text", True, "its title"),
             Column("brand", "text", False, "its brand"),
             Column("category_path", "text", True, "its category path, A > B > C"),
             Column("popularity", "number", False, "how popular it is (empty: unknown)"),
             Column("price", "number", False, "its price (empty: unknown)")))


def load_catalog(path: str | Path, flag: str = "--catalog") -> Catalog:
    """Load a listings CSV (optionally .gz) with the columns of :data:`CATALOG_FILE`
    (``source``, ``brand``, ``popularity`` and ``price`` may be absent), read through the input layer."""
    table = read_table(path, CATALOG_FILE, flag)
    names = [c.name for c in CATALOG_FILE.columns]
    columns: dict[str, list] = {name: [] for name in names}
    for row in table.rows:
        for name in names:
            value = row[name]
            columns[name].append((math.nan if value is None else float(value)) if name in ("popularity", "price")
                                 else ("" if value is None else value))
    columns["category_path"] = leaf_category_paths(np.array(columns["category_path"], dtype=object))
    return Catalog(
        **{k: np.array(v, dtype=object) for k, v in columns.items() if k not in ("popularity", "price")},
        popularity=np.array(columns["popularity"], dtype=np.float64),
        price=np.array(columns["price"], dtype=np.float64),
    )
