"""Confusable leaves: pairs of categories the data cannot tell apart (DESIGN.md, "Taxonomies overlap").

A map is a tab-separated file whose first two columns are two leaf ids, one pair a line; ``#``
starts a comment line, the first other line is a header if it begins ``leaf_a``, and any further columns
(paths, evidence) are for people and ignored here. ``qcat data audit`` writes one
(``confusable.tsv``); a team edits it by deleting or adding lines. Pairs are not transitive: a
leaf is confusable with the leaves it is paired with, not with their partners.

A model bundle records the map it was trained with (:data:`CONFIG_KEY` in its config, with the
file's sha256), so ``qcat evaluate`` can report lenient top-1 without being told the map again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from qcat.errors import InputError
from qcat.paths import check_file
from qcat.taxonomy import Taxonomy

FILE_NAME = "confusable.tsv"
CONFIG_KEY = "confusable"  # a bundle's config: {"pairs": [[a, b], ...], "sha256": ..., "source": ...}
HEADER = "leaf_a"


@dataclass(frozen=True)
class ConfusableMap:
    """Unordered pairs of leaf ids (each pair stored as a sorted tuple), where they came from and
    the sha256 of the text they were read from."""

    pairs: tuple[tuple[str, str], ...]
    source: str
    sha256: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(sorted({tuple(sorted(p)) for p in self.pairs})))

    def __len__(self) -> int:
        return len(self.pairs)

    def partners(self, leaf: str) -> tuple[str, ...]:
        return tuple(b if a == leaf else a for a, b in self.pairs if leaf in (a, b))

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


def parse_confusable(text: str, where: str, taxonomy: Taxonomy | None = None) -> ConfusableMap:
    """The map in ``text`` (the contents of ``where``); with ``taxonomy``, every id must be a leaf of it."""
    pairs, first = [], True
    for row, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if first and line.startswith(HEADER):  # the header: the first line that is not a comment
            first = False
            continue
        first = False
        cells = line.split("\t")
        if len(cells) < 2 or not cells[0].strip() or not cells[1].strip():
            raise InputError(f"{where}, line {row}: want two leaf ids separated by a tab, got {line[:80]!r}")
        a, b = cells[0].strip(), cells[1].strip()
        if a == b:
            raise InputError(f"{where}, line {row}: pairs {a!r} with itself; a pair needs two different leaves")
        if taxonomy is not None:
            for leaf in (a, b):
                if leaf not in taxonomy:
                    raise InputError(f"{where}, line {row}: {leaf!r} is not a category of the taxonomy")
                if not taxonomy.is_leaf(leaf):
                    raise InputError(f"{where}, line {row}: {leaf!r} ({taxonomy.path_of(leaf)}) is not a leaf")
        pairs.append((a, b))
    return ConfusableMap(tuple(pairs), where, hashlib.sha256(text.encode("utf-8")).hexdigest())


def load_confusable(path: str | Path, taxonomy: Taxonomy | None = None) -> ConfusableMap:
    """Read a confusable map file (see the module docstring), refusing a line it cannot use."""
    path = check_file(path, "--confusable")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--confusable {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"--confusable {path}: cannot read it ({exc.strerror})") from None
    return parse_confusable(text, str(path), taxonomy)


def recorded_map(model) -> ConfusableMap | None:
    """The map a model's bundle recorded (``config["confusable"]``), if any."""
    recorded = getattr(model, "config", {}).get(CONFIG_KEY)
    return None if recorded is None else ConfusableMap.from_config(recorded, "the bundle's recorded map")
