"""Confusable leaves: pairs of categories the data cannot tell apart (DESIGN.md, "Taxonomies overlap").

A map is a tab-separated file whose first two columns are two leaf ids, one pair a line, read
through the input layer (:mod:`qcat.inputs`, :data:`SCHEMA`): a line starting with ``#`` is a
comment anywhere (a team comments a pair out), the first other line is a header if it begins
``leaf_a`` (then the columns are found by name), and any further columns (paths, evidence) are for
people and ignored here. ``qcat data audit`` writes one
(``confusable.tsv``); a team edits it by deleting or adding lines. Pairs are not transitive: a
leaf is confusable with the leaves it is paired with, not with their partners.

A model bundle records the map it was trained with (:data:`CONFIG_KEY` in its config, with the
file's sha256), so ``qcat evaluate`` can report lenient top-1 without being told the map again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from qcat.errors import InputError, shown
from qcat.inputs import COMMENTS_ANYWHERE, Column, FileSchema, read_table
from qcat.taxonomy import Taxonomy

FILE_NAME = "confusable.tsv"
CONFIG_KEY = "confusable"  # a bundle's config: {"pairs": [[a, b], ...], "sha256": ..., "source": ...}
HEADER = "leaf_a"
SCHEMA = FileSchema(
    kind="confusable map", flag="--confusable", short_rows=True,
    columns=(Column("leaf_a", "text", True, "a leaf id"), Column("leaf_b", "text", True, "another leaf id")),
    delimiter="\t", header="optional", comments=COMMENTS_ANYWHERE, match_queries=False)


@dataclass(frozen=True)
class ConfusableMap:
    """Unordered pairs of leaf ids (each pair stored as a sorted tuple), where they came from and
    the sha256 of the text they were read from."""

    pairs: tuple[tuple[str, str], ...]
    source: str
    sha256: str
    _partners: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pairs = tuple(sorted({tuple(sorted(p)) for p in self.pairs}))
        partners: dict[str, list[str]] = {}
        for a, b in pairs:
            partners.setdefault(a, []).append(b)
            partners.setdefault(b, []).append(a)
        object.__setattr__(self, "pairs", pairs)
        object.__setattr__(self, "_partners", {leaf: tuple(others) for leaf, others in partners.items()})

    def __len__(self) -> int:
        return len(self.pairs)

    def partners(self, leaf: str) -> tuple[str, ...]:
        """The leaves paired with ``leaf``, in the order of the pairs."""
        return self._partners.get(leaf, ())

    def describe(self) -> str:
        return f"{self.source} ({len(self):,} pairs, sha256 {self.sha256[:12]})"

    def to_config(self) -> dict:
        return {"pairs": [list(p) for p in self.pairs], "sha256": self.sha256, "source": self.source}

    @classmethod
    def from_config(cls, recorded: dict, where: str) -> "ConfusableMap":
        try:
            pairs = tuple((str(a), str(b)) for a, b in recorded["pairs"])
            return cls(pairs, str(recorded.get("source", where)), str(recorded["sha256"]))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: its recorded confusable map is malformed (want pairs and sha256)") from None


def load_confusable(path: str | Path, taxonomy: Taxonomy | None = None, flag: str = "--confusable",
                    allow_empty: bool = False) -> ConfusableMap:
    """A confusable map file read through the input layer (:data:`SCHEMA`), refusing a line it
    cannot use; with ``taxonomy``, every id must be a leaf of it. A map that holds no pair (empty,
    or a header and comments only) is refused: lenient top-1 would silently equal strict. Only
    ``allow_empty`` takes one: a reader of what ``qcat data audit`` wrote when it found no pair."""
    table = read_table(path, SCHEMA, flag, allow_empty=True)
    if not table.rows and not allow_empty:
        raise InputError(f"{table.where()}: holds no pair (a confusable map; want lines of two leaf ids, leaf_a and "
                         "leaf_b): lenient top-1 would equal strict. qcat data audit writes a map with a header only "
                         "when it finds no pair; then there is no map to give")
    pairs = []
    for row in table.rows:
        where = table.where(row.line)
        a, b = str(row["leaf_a"]), str(row["leaf_b"])
        if a == b:
            raise InputError(f"{where}: pairs {shown(a)} with itself; a pair needs two different leaves")
        if taxonomy is not None:
            for leaf in (a, b):
                if leaf not in taxonomy:
                    raise InputError(f"{where}: {shown(leaf)} is not a category of the taxonomy")
                if not taxonomy.is_leaf(leaf):
                    raise InputError(f"{where}: {shown(leaf)} ({taxonomy.path_of(leaf)}) is not a leaf")
        pairs.append((a, b))
    return ConfusableMap(tuple(pairs), str(table.path), table.sha256)


def recorded_map(model) -> ConfusableMap | None:
    """The map a model's bundle recorded (``config["confusable"]``), if any."""
    recorded = getattr(model, "config", {}).get(CONFIG_KEY)
    return None if recorded is None else ConfusableMap.from_config(recorded, "the bundle's recorded map")
