"""Where a model bundle's training data came from, and the checks built on it.

Every bundle ``qcat train`` writes records in its config a ``data`` block: the files it was
trained on (paths for people to read, the SHA-256 of their bytes for the checks), the period,
the split seed, the click threshold and the internal-node rule. Beside it,
``seen_queries.npz`` holds a 64-bit fingerprint of every query the model saw while it was
trained or its settings were chosen (the train and validation splits); the parts of a hybrid
bundle share the hybrid's. With them:

- ``qcat evaluate`` uses the split a model was trained with and reports, next to every
  figure, how many of the evaluated queries the model saw (count and share);
- ``qcat train hybrid`` refuses parts of different taxonomies or training data, and reads
  its validation data from the parts' own record instead of a default corpus.

A bundle written before this record existed has no fingerprints: its overlap is reported as
unknown, never as zero.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

import numpy as np

from qcat.bundles.bundle import Manifest, read_manifest, sha256_file
from qcat.bundles.demo import demo_root
from qcat.errors import InputError
from qcat.text.normalize import normalize

SEEN_FILE = "seen_queries.npz"
# What makes two training sets the same data: content hashes and settings, never paths.
IDENTITY_KEYS = ("log_sha256", "taxonomy_sha256", "period", "min_clicks", "split_seed", "internal_nodes",
                 "catalog_sha256", "catalog_only")


def file_source(kind: str, path: Path) -> dict:
    """``{kind: absolute path, kind_sha256: hash}`` of one input file."""
    return {kind: str(Path(path).resolve()), f"{kind}_sha256": sha256_file(path)}


def named_file(path: str | Path, sha256: str) -> dict:
    """``{"name": file name, "sha256": hash}``: a file recorded by what identifies its bytes, never the
    trainer's directories (a ``--judged`` file, issue 53 item 9); the checks compare the hash."""
    return {"name": Path(path).name, "sha256": sha256}


def log_source(log) -> dict:
    """The ``data`` block of a model trained on a click log (a :class:`qcat.training.data.corpus.LogCorpus`)."""
    return (file_source("log", log.log) | file_source("taxonomy", log.taxonomy_path)
            | {"min_clicks": log.min_clicks, "split_seed": log.split_seed, "internal_nodes": log.internal_nodes})


def catalog_source(catalog: Path, corpus=None, catalog_only: bool = False) -> dict:
    """The catalog keys of a ``data`` block (``qcat train --catalog``): its path, or ``corpus``
    for the corpus's own catalog file (so the demo's record names no machine's path), its hash
    and whether it trained alone."""
    own = corpus is not None and hasattr(corpus, "meta") and "catalog" in corpus.meta \
        and Path(catalog).resolve() == corpus.path("catalog").resolve()
    return {"catalog": "corpus" if own else str(Path(catalog).resolve()), "catalog_sha256": sha256_file(catalog),
            "catalog_only": bool(catalog_only)}


def is_demo_corpus(directory: Path) -> bool:
    """Whether ``directory`` is the installed qcat-demo corpus."""
    root = demo_root()
    return root is not None and Path(directory).resolve() == (root / "corpus").resolve()


def corpus_source(corpus, period: str) -> dict:
    """The ``data`` block of a model trained on a period of a corpus (:class:`qcat.training.data.corpus.Corpus`);
    the demo corpus is named ``demo``, wherever the package is installed."""
    name = "demo" if is_demo_corpus(corpus.directory) else str(corpus.directory)
    return {"corpus": name, "period": period,
            "log_sha256": sha256_file(corpus.path("log")), "taxonomy_sha256": sha256_file(corpus.path("taxonomy")),
            "min_clicks": corpus.meta.get("min_clicks", 3), "split_seed": corpus.meta.get("split_seed", 0),
            "internal_nodes": corpus.internal_nodes}


def identity(source: dict) -> dict:
    """The part of a ``data`` block that says which data it was: hashes and settings."""
    return {key: source[key] for key in IDENTITY_KEYS if key in source}


def describe(source: dict) -> str:
    """One line naming the data of a ``data`` block, for error messages."""
    where = source.get("log") or source.get("corpus") or "unrecorded data"
    settings = ", ".join(f"{key} {source[key]}" for key in ("period", "min_clicks", "split_seed", "internal_nodes")
                         if key in source)
    digest = source.get("log_sha256")
    return f"{where}" + (f" (sha256 {digest[:12]}…)" if digest else "") + (f", {settings}" if settings else "")


def data_source(manifest: Manifest) -> dict:
    """The ``data`` block of a bundle (empty when it records none)."""
    source = manifest.config.get("data")
    return source if isinstance(source, dict) else {}


def each_fingerprint(queries: Iterable[str]) -> np.ndarray:
    """The 64-bit fingerprint of each normalized query, in order."""
    digests = [hashlib.blake2b(normalize(q).encode("utf-8"), digest_size=8).digest() for q in queries]
    return np.frombuffer(b"".join(digests), dtype=">u8").astype(np.uint64)


def fingerprints(queries: Iterable[str]) -> np.ndarray:
    """Sorted distinct 64-bit fingerprints of the normalized queries."""
    return np.unique(each_fingerprint(queries))


def seen_mask(queries: Iterable[str], seen: np.ndarray | None) -> np.ndarray | None:
    """Which of ``queries`` (each normalized) a model saw in training, in order; None when its
    bundle records nothing."""
    return None if seen is None else np.isin(each_fingerprint(queries), seen)


def unseen_by_every(queries: Iterable[str], seens: list[np.ndarray | None]) -> np.ndarray | None:
    """Which of ``queries`` (each normalized) none of the models saw in training (``seens``: each
    bundle's fingerprints), in order; None when a bundle records nothing."""
    if any(seen is None for seen in seens):
        return None
    queries = list(queries)
    unseen = np.ones(len(queries), dtype=bool)
    for seen in seens:
        unseen &= ~seen_mask(queries, seen)
    return unseen


def write_seen_queries(directory: Path, queries: Iterable[str], also: Iterable[np.ndarray] = ()) -> None:
    """Write the fingerprints of the queries a model saw (and the fingerprints ``also``, a
    hybrid's parts') into its bundle directory, before the bundle's manifest is written, so
    that the file is hashed with the others."""
    directory.mkdir(parents=True, exist_ok=True)
    seen = np.unique(np.concatenate([fingerprints(queries), *also]))
    np.savez_compressed(directory / SEEN_FILE, fingerprints=seen)


def read_seen_fingerprints(directory: str | Path) -> np.ndarray | None:
    """The fingerprints recorded in a (verified) bundle, or None when it records none. A part of
    a hybrid bundle saw what the hybrid saw: it reads the hybrid's record, which the hybrid's
    manifest verifies (one copy, not one per part)."""
    manifest = read_manifest(directory)
    if SEEN_FILE in manifest.data["files"]:
        with np.load(manifest.file(SEEN_FILE), allow_pickle=False) as npz:
            return npz["fingerprints"]
    parent = Path(directory).resolve().parent
    if (parent / "manifest.json").is_file():
        enclosing = read_manifest(parent)
        if enclosing.backend == "hybrid" and Path(directory).resolve().name in enclosing.data.get("parts", {}):
            return read_seen_fingerprints(parent)
    return None


def overlap(queries: Iterable[str], seen: np.ndarray | None) -> dict:
    """How many of ``queries`` (distinct, normalized) a model saw in training: ``{"queries",
    "seen", "share"}``, with ``seen`` and ``share`` None when the bundle records nothing."""
    evaluated = fingerprints(queries)
    if seen is None:
        return {"queries": int(len(evaluated)), "seen": None, "share": None}
    count = int(np.isin(evaluated, seen, assume_unique=True).sum())
    return {"queries": int(len(evaluated)), "seen": count, "share": count / max(len(evaluated), 1)}


def format_overlap(entry: dict) -> str:
    if entry["seen"] is None:
        return "overlap with training queries unknown (the bundle records none)"
    return f"{entry['seen']:,} of {entry['queries']:,} queries seen in training ({entry['share']:.1%})"


def check_same_data(named: dict[str, Manifest]) -> dict:
    """The one taxonomy file and training data every bundle of ``named`` (flag or name ->
    manifest) was trained on, or a one-line refusal naming two that differ. Returns the first
    bundle's ``data`` block. (A bundle's own taxonomy is the part of the file its labels use,
    so two parts of one taxonomy may hold different subsets of it.)"""
    (first_name, first), *others = named.items()
    ours = identity(data_source(first))
    for name, manifest in others:
        theirs = identity(data_source(manifest))
        both = f"{first_name} {first.directory} and {name} {manifest.directory} were trained on"
        if "taxonomy_sha256" in ours and "taxonomy_sha256" in theirs \
                and ours["taxonomy_sha256"] != theirs["taxonomy_sha256"] \
                or ours == theirs == {} and first.data.get("taxonomy_hash") != manifest.data.get("taxonomy_hash"):
            taxonomies = [describe_taxonomy(m) for m in (first, manifest)]
            raise InputError(f"{both} different taxonomies ({taxonomies[0]} vs {taxonomies[1]}): train both on the "
                             f"same taxonomy")
        if ours != theirs:
            raise InputError(f"{both} different data ({describe(data_source(first))} vs "
                             f"{describe(data_source(manifest))}): train both on the same log and settings")
    return data_source(first)


def describe_taxonomy(manifest: Manifest) -> str:
    source = data_source(manifest)
    if "taxonomy_sha256" in source:
        return f"{source.get('taxonomy', 'a taxonomy file')}, sha256 {source['taxonomy_sha256'][:12]}…"
    return f"taxonomy hash {str(manifest.data.get('taxonomy_hash'))[:12]}…"


def check_same_source(recorded: dict, given: dict, who: str) -> None:
    """Refuse data ``given`` that is not the data ``recorded`` for ``who`` (compared on the
    hashes and settings both record)."""
    ours, theirs = identity(recorded), identity(given)
    differ = [key for key in ours if key in theirs and ours[key] != theirs[key]]
    if differ:
        raise InputError(f"{who} were trained on {describe(recorded)}, not on the data given "
                         f"({describe(given)}; {', '.join(differ)} differ): drop the data flags to use theirs")


def check_file_unchanged(source: dict, kind: str, where: Path) -> None:
    """Refuse when the file recorded as ``source[kind]`` no longer has its recorded hash."""
    recorded = source.get(f"{kind}_sha256")
    path = Path(source[kind])
    if not path.is_file():
        raise InputError(f"{where} was trained on --{kind} {path}, which no longer exists: give --{kind} "
                         f"(with the same contents)")
    if recorded is not None and sha256_file(path) != recorded:
        raise InputError(f"{where} was trained on --{kind} {path}, which has changed since (sha256 "
                         f"{recorded[:12]}… recorded): retrain, or give the original file")


LOG_DEFAULTS = {"min_clicks": 3, "split_seed": 0, "internal_nodes": "other"}


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def log_settings(log: Path, model_dirs: list[Path], given: dict) -> dict:
    """The settings (``min_clicks``, ``split_seed``, ``internal_nodes``) to read and split ``log``
    with for evaluating the bundles in ``model_dirs``: those of the bundles trained on this very log (same hash), so
    that their test split is the one they never trained on. A given value that contradicts
    them, or bundles that disagree, are refused; on other data, the given values or defaults."""
    digest = sha256_file(log)
    trained_here = {directory: data_source(read_manifest(directory)) for directory in model_dirs}
    trained_here = {d: source for d, source in trained_here.items() if source.get("log_sha256") == digest}
    settings = {}
    for key, default in LOG_DEFAULTS.items():
        recorded = {d: source[key] for d, source in trained_here.items() if key in source}
        flag = "--" + key.replace("_", "-")
        if len(set(recorded.values())) > 1:
            (a, va), (b, vb) = list(recorded.items())[:2]
            raise InputError(f"{a} and {b} were trained on {log} with different {flag} ({_shown(va)} vs {_shown(vb)}), so "
                             f"each one's test split holds queries the other trained on: evaluate them separately")
        if recorded:
            directory, value = next(iter(recorded.items()))
            if given.get(key) is not None and given[key] != value:
                raise InputError(f"{flag} {_shown(given[key])}: {directory} was trained on {log} with {flag} "
                                 f"{_shown(value)}; another value would not give its own test split (drop {flag})")
            settings[key] = value
        else:
            settings[key] = default if given.get(key) is None else given[key]
    return settings
