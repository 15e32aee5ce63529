"""The taxonomy itself (:class:`Taxonomy`): nodes with ids and paths, parents, leaves, Other leaves
and a content hash; the check that parent links make a tree that agrees with the paths
(:func:`check_tree`), and a taxonomy built from paths alone (:func:`from_paths`)."""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.errors import TaxonomyError

SEPARATOR = " > "
AMBIGUOUS = -2  # marks a path carried by several ids
OTHER_LEAF = "Other"  # the leaf that stands for an internal node's own items (``A > B > Other``)
OTHER_SUFFIX = "/other"  # the id of a new Other leaf: ``<node id>/other``


@dataclass(frozen=True)
class Taxonomy:
    """A category tree. Node ``i`` has id ``ids[i]``, path ``paths[i]`` (a tuple of names)
    and parent ``parents[i]`` (a node position, or -1 at the root level).

    Ids are unique. Paths usually are too, but real taxonomies (Best Buy's) repeat a
    path under different ids; such a path cannot be used to name a category.
    """

    ids: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    parents: tuple[int, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)
    _by_path: dict[tuple[str, ...], int] = field(init=False, repr=False, compare=False)
    _parent_positions: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (len(self.ids) == len(self.paths) == len(self.parents)):
            raise TaxonomyError("taxonomy ids, paths and parents differ in length")
        index: dict[str, int] = {}
        by_path: dict[tuple[str, ...], int] = {}
        for i, (node_id, path) in enumerate(zip(self.ids, self.paths)):
            if not node_id:
                raise TaxonomyError(f"taxonomy node {i + 1} has an empty id")
            if not path or any(not name for name in path):
                raise TaxonomyError(f"taxonomy node {node_id!r} has an empty path or path element")
            if node_id in index:
                raise TaxonomyError(f"taxonomy id {node_id!r} appears twice")
            index[node_id] = i
            by_path[path] = AMBIGUOUS if path in by_path else i
        check_tree(self.ids, self.paths, self.parents)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_by_path", by_path)
        object.__setattr__(self, "_parent_positions", frozenset(self.parents))

    @classmethod
    def from_path_tuples(cls, ids: tuple[str, ...], paths: tuple[tuple[str, ...], ...]) -> Taxonomy:
        """A taxonomy whose parent links follow the paths: the parent of ``A > B`` is ``A``."""
        by_path: dict[tuple[str, ...], int] = {}
        for i, path in enumerate(paths):
            by_path[path] = AMBIGUOUS if path in by_path else i
        parents = []
        for node_id, path in zip(ids, paths):
            if len(path) <= 1:
                parents.append(-1)
                continue
            parent = by_path.get(path[:-1])
            if parent is None:
                raise TaxonomyError(
                    f"taxonomy node {node_id!r} ({SEPARATOR.join(path)}) has no parent node "
                    f"{SEPARATOR.join(path[:-1])!r}"
                )
            if parent == AMBIGUOUS:
                raise TaxonomyError(
                    f"taxonomy node {node_id!r}: its parent path {SEPARATOR.join(path[:-1])!r} "
                    "belongs to several ids"
                )
            parents.append(parent)
        return cls(ids, paths, tuple(parents))

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._index

    def index(self, node_id: str) -> int:
        """Position of ``node_id``; raises :class:`TaxonomyError` if unknown."""
        try:
            return self._index[node_id]
        except KeyError:
            raise TaxonomyError(f"unknown category id {node_id!r}") from None

    def path_of(self, node_id: str) -> str:
        """The `` > ``-joined path of ``node_id``."""
        return SEPARATOR.join(self.paths[self.index(node_id)])

    def id_of_path(self, path: str | tuple[str, ...]) -> str | None:
        """The id of the node at ``path`` (a string joined by `` > `` or a tuple), or None."""
        key = tuple(part.strip() for part in path.split(">")) if isinstance(path, str) else path
        i = self._by_path.get(key)
        if i == AMBIGUOUS:
            raise TaxonomyError(f"category path {SEPARATOR.join(key)!r} belongs to several ids; name it by id")
        return None if i is None else self.ids[i]

    def resolve(self, category: str) -> str | None:
        """Map a category given as an id or as a path to its id; None if unknown. A text that is
        one node's id and another node's path (id ``Toys`` of ``Stuff``, and the node at path
        ``Toys``) names neither for sure: :class:`TaxonomyError`, as for a path of several ids."""
        if category in self._index:
            at_path = self._by_path.get(tuple(part.strip() for part in category.split(">")))
            if at_path is not None and (at_path == AMBIGUOUS or self.ids[at_path] != category):
                other = "several nodes" if at_path == AMBIGUOUS else f"node {self.ids[at_path]!r}"
                raise TaxonomyError(f"category {category!r} is the id of node {category!r} "
                                    f"({self.path_of(category)}) and the path of {other}; name it by a path or "
                                    f"an id that is not both")
            return category
        return self.id_of_path(category)  # "A > B" or a one-level path such as "Automotive"

    def parent(self, node_id: str) -> str | None:
        parent = self.parents[self.index(node_id)]
        return None if parent < 0 else self.ids[parent]

    @property
    def leaves(self) -> tuple[str, ...]:
        """Ids of the nodes without children, in file order."""
        has_child = self._parent_positions
        return tuple(node_id for i, node_id in enumerate(self.ids) if i not in has_child)

    def is_leaf(self, node_id: str) -> bool:
        return self.index(node_id) not in self._parent_positions

    def ancestor_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ancestors, depth)`` of every node, as arrays with one row more than the taxonomy has
        nodes: ``ancestors[i]`` the positions of node i's path, department first, -1 padded;
        ``depth[i]`` its length (a department 1). The last row, which position -1 reads, stands for
        no node (depth 0, no ancestors)."""
        n = len(self.ids)
        parents = np.asarray(self.parents, dtype=np.int64).reshape(n)
        depth = np.zeros(n + 1, dtype=np.int64)
        depth[:n] = [len(path) for path in self.paths]
        ancestors = np.full((n + 1, max(int(depth.max()), 1)), -1, dtype=np.int64)
        for d in range(1, int(depth.max()) + 1):  # parents (depth d - 1) are filled before children
            at = np.flatnonzero(depth[:n] == d)
            ancestors[at, :d - 1] = ancestors[parents[at], :d - 1]
            ancestors[at, d - 1] = at
        return ancestors, depth

    def with_other_leaves(self, node_ids) -> tuple[Taxonomy, dict[str, str]]:
        """This taxonomy with an explicit ``Other`` leaf under each internal node of
        ``node_ids`` (``A > B`` -> ``A > B > Other``, the demo catalog's rule), and the map from
        each of those nodes to its ``Other`` leaf. A node's existing ``Other`` leaf is used as it
        is; a new one gets the id ``<node id>/other`` (:data:`OTHER_SUFFIX`)."""
        ids, paths, parents = list(self.ids), list(self.paths), list(self.parents)
        other_of: dict[str, str] = {}
        for node_id in node_ids:
            position = self.index(node_id)
            path = self.paths[position] + (OTHER_LEAF,)
            existing = self._by_path.get(path)
            if existing is not None and existing != AMBIGUOUS and self.is_leaf(self.ids[existing]):
                other_of[node_id] = self.ids[existing]
                continue
            new_id = node_id + OTHER_SUFFIX
            if existing is not None or new_id in self._index:
                raise TaxonomyError(f"category {node_id!r} ({SEPARATOR.join(self.paths[position])}) is not a leaf and "
                                    f"its Other leaf cannot be added: {SEPARATOR.join(path)!r} or id {new_id!r} "
                                    f"already names another node")
            other_of[node_id] = new_id
            ids.append(new_id)
            paths.append(path)
            parents.append(position)
        if len(ids) == len(self.ids):
            return self, other_of
        return Taxonomy(tuple(ids), tuple(paths), tuple(parents)), other_of

    @property
    def content_hash(self) -> str:
        """sha256 of the sorted ``id<TAB>path<TAB>parent`` lines: independent of format and order."""
        lines = sorted(
            f"{i}\t{SEPARATOR.join(p)}\t{self.ids[parent] if parent >= 0 else ''}"
            for i, p, parent in zip(self.ids, self.paths, self.parents)
        )
        return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()

    def subset(self, node_ids: list[str] | tuple[str, ...]) -> Taxonomy:
        """The smallest taxonomy holding ``node_ids`` and all their ancestors, in this order."""
        keep: set[int] = set()
        for node_id in node_ids:
            i = self.index(node_id)
            while i >= 0 and i not in keep:
                keep.add(i)
                i = self.parents[i]
        order = sorted(keep)
        position = {old: new for new, old in enumerate(order)}
        return Taxonomy(
            tuple(self.ids[i] for i in order),
            tuple(self.paths[i] for i in order),
            tuple(position[self.parents[i]] if self.parents[i] >= 0 else -1 for i in order),
        )

    def merge(self, other: Taxonomy) -> Taxonomy:
        """This taxonomy plus the nodes of ``other`` it lacks (e.g. two subsets of one tree).
        An id the two name with different paths is an error."""
        conflicts = [i for i in other.ids if i in self and self.path_of(i) != other.path_of(i)]
        if conflicts:
            raise TaxonomyError(f"taxonomies disagree on the path of {conflicts[:3]}")
        ids, paths, parents = list(self.ids), list(self.paths), list(self.parents)
        position = dict(self._index)
        for i, node_id in enumerate(other.ids):
            if node_id in position:
                continue
            parent = other.parents[i]
            position[node_id] = len(ids)
            ids.append(node_id)
            paths.append(other.paths[i])
            parents.append(position[other.ids[parent]] if parent >= 0 else -1)
        return Taxonomy(tuple(ids), tuple(paths), tuple(parents))

    def to_tsv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "path", "parent"])
        for node_id, path, parent in zip(self.ids, self.paths, self.parents):
            writer.writerow([node_id, SEPARATOR.join(path), self.ids[parent] if parent >= 0 else ""])
        return out.getvalue()

    def save_tsv(self, path: str | Path) -> None:
        Path(path).write_text(self.to_tsv(), encoding="utf-8")


def check_tree(ids, paths, parents, where=None) -> None:
    """Refuse parent links that are not a tree or that contradict the paths: a parent out of range
    or the node itself, a cycle (named node by node), or a parent whose path is not the node's path
    less its last name (a root's path has one name). ``where(i)`` names node ``i`` in the error
    (default: its id; a loader gives the file's line or record)."""
    where = where or (lambda i: f"node {ids[i]!r}")
    for i, parent in enumerate(parents):
        if not -1 <= parent < len(ids) or parent == i:
            raise TaxonomyError(f"{where(i)} has an invalid parent")
    state = [0] * len(ids)  # 0 unvisited, 1 on the current walk, 2 known to reach the root
    for start in range(len(ids)):
        walk, i = [], start
        while i >= 0 and state[i] == 0:
            state[i] = 1
            walk.append(i)
            i = parents[i]
        if i >= 0 and state[i] == 1:
            cycle = walk[walk.index(i):] + [i]
            raise TaxonomyError(f"parent links form a cycle: {' -> '.join(ids[n] for n in cycle)} "
                                f"(each names the next as its parent); a taxonomy is a tree")
        for n in walk:
            state[n] = 2
    for i, parent in enumerate(parents):
        expected = paths[i][:-1]
        if (paths[parent] if parent >= 0 else ()) != expected:
            said = f"parent {ids[parent]!r} ({SEPARATOR.join(paths[parent])})" if parent >= 0 else "no parent"
            wanted = f"{SEPARATOR.join(expected)!r}" if expected else "none (it is at the top level)"
            raise TaxonomyError(f"{where(i)} ({SEPARATOR.join(paths[i])}) names {said}, but its path says its "
                                f"parent is {wanted}; make the parent and the path agree")


def from_paths(paths: list[str], id_prefix: str = "c") -> Taxonomy:
    """Build a taxonomy from `` > ``-joined paths, adding every prefix as a node.

    Ids are ``{id_prefix}{n}`` numbered in sorted path order, so the same set of paths
    always gives the same ids.
    """
    nodes: set[tuple[str, ...]] = set()
    for text in paths:
        path = tuple(part.strip() for part in text.split(">"))
        for depth in range(1, len(path) + 1):
            nodes.add(path[:depth])
    ordered = sorted(nodes)
    return Taxonomy.from_path_tuples(tuple(f"{id_prefix}{n + 1}" for n in range(len(ordered))), tuple(ordered))
