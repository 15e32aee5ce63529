"""Product catalogs: listings with a title, brand, leaf category path and popularity."""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qcat.errors import InputError
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


def _number(text: str, path: Path, row: int, column: str) -> float:
    if text.strip() == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{path} row {row}: {column} {text!r} is not a number") from None


def load_catalog(path: str | Path) -> Catalog:
    """Load a listings CSV (optionally .gz) with columns
    ``listing_id, source, title, brand, category_path, popularity, price``
    (``source``, ``brand``, ``popularity`` and ``price`` may be absent)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read catalog {path}: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"catalog {path} is not valid UTF-8") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"catalog {path} lacks columns {', '.join(missing)}")
    columns: dict[str, list] = {name: [] for name in ("listing_id", "source", "title", "brand", "category_path", "popularity", "price")}
    for row_number, row in enumerate(reader, start=2):
        if not row["listing_id"] or not row["title"] or not row["category_path"]:
            raise InputError(f"catalog {path} row {row_number}: listing_id, title and category_path must not be empty")
        columns["listing_id"].append(row["listing_id"])
        columns["source"].append(row.get("source") or "")
        columns["title"].append(row["title"])
        columns["brand"].append(row.get("brand") or "")
        columns["category_path"].append(row["category_path"])
        columns["popularity"].append(_number(row.get("popularity") or "", path, row_number, "popularity"))
        columns["price"].append(_number(row.get("price") or "", path, row_number, "price"))
    if not columns["listing_id"]:
        raise InputError(f"catalog {path} holds no listings")
    columns["category_path"] = leaf_category_paths(np.array(columns["category_path"], dtype=object))
    return Catalog(
        **{k: np.array(v, dtype=object) for k, v in columns.items() if k not in ("popularity", "price")},
        popularity=np.array(columns["popularity"], dtype=np.float64),
        price=np.array(columns["price"], dtype=np.float64),
    )
