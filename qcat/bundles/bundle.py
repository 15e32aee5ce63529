"""Model bundles: a directory of files plus ``manifest.json`` holding their hashes.

Loading verifies every hash before any array is read, and arrays are read from
``.npz`` with ``allow_pickle=False``: a bundle never executes code.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from qcat.errors import BundleError
from qcat.inputs.paths import why_missing
from qcat.taxonomy import Taxonomy, load_taxonomy
from qcat.text.normalize import NORMALIZER
from qcat.version import __version__

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TAXONOMY_FILE = "taxonomy.tsv"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_lines(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Manifest:
    directory: Path
    data: dict[str, Any]

    @property
    def backend(self) -> str:
        return self.data["backend"]

    @property
    def config(self) -> dict[str, Any]:
        return self.data.get("config", {})

    @property
    def metrics(self) -> dict[str, Any]:
        return self.data.get("metrics", {})

    def file(self, name: str) -> Path:
        if name not in self.data["files"]:
            raise BundleError(f"model bundle {self.directory} lists no file {name!r}")
        return self.directory / name


def write_bundle(
    directory: str | Path,
    backend: str,
    taxonomy: Taxonomy,
    vocabulary_hash: str | None,
    config: dict[str, Any],
    metrics: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Manifest:
    """Write the manifest of a bundle whose other files are already in ``directory``.

    Every regular file in the directory (except the manifest) is hashed and listed.
    """
    directory = Path(directory)
    taxonomy.save_tsv(directory / TAXONOMY_FILE)
    files = {
        entry.name: sha256_file(entry)
        for entry in sorted(directory.iterdir())
        if entry.is_file() and entry.name != MANIFEST
    }
    data = {
        "format_version": FORMAT_VERSION,
        "backend": backend,
        "qcat_version": __version__,
        "normalizer": NORMALIZER,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "files": files,
        "taxonomy_hash": taxonomy.content_hash,
        "vocabulary_hash": vocabulary_hash,
        "config": config,
        "metrics": metrics or {},
        **(extra or {}),
    }
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, directory / MANIFEST)
    return Manifest(directory, data)


def normalizer_mismatch(manifest: Manifest) -> str:
    """"" when the bundle was trained under this qcat's query normalizer, else what differs and what
    to do (a bundle from before folding answers a folded query it may never have seen that way)."""
    trained = manifest.data.get("normalizer", 1)
    if trained == NORMALIZER:
        return ""
    return (f"model bundle {manifest.directory} was trained under query normalizer {trained} and this qcat "
            f"normalizes with {NORMALIZER} (it folds accents, hyphens, possessives and HTML entities), so "
            "queries holding them reach the model in a form it was not trained on: retrain the bundle with "
            "this qcat")


def relist_files(directory: str | Path) -> Manifest:
    """Hash and list again every regular file of a bundle directory in its manifest (after a file
    was added to a copy of a bundle); the rest of the manifest stays as it was."""
    directory = Path(directory)
    data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    data["files"] = {entry.name: sha256_file(entry) for entry in sorted(directory.iterdir())
                     if entry.is_file() and entry.name != MANIFEST}
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, directory / MANIFEST)
    return Manifest(directory, data)


def read_manifest(directory: str | Path, verify: bool = True) -> Manifest:
    """Read ``manifest.json`` and (by default) verify the hash of every listed file."""
    directory = Path(directory)
    if directory.is_file():
        hint = f" (give its directory, {directory.parent})" if directory.name == MANIFEST else ""
        raise BundleError(f"{directory} is a file; a model is a bundle directory{hint}")
    if not directory.is_dir():
        missing = why_missing(directory)
        raise BundleError(f"model directory {directory} {missing or 'is not a directory'}")
    path = directory / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{directory} is not a model bundle: no {MANIFEST}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or not isinstance(data.get("backend"), str) \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in data["files"].items()):
        raise BundleError(f"{path} is not a qcat manifest (it needs a backend name and a files object of hashes)")
    found = data.get("format_version")
    if isinstance(found, int) and not isinstance(found, bool) and found > FORMAT_VERSION:
        raise BundleError(f"{path}: bundle format {found} was written by a newer qcat "
                          f"({data.get('qcat_version', 'unknown version')}) than this one ({__version__}, reads format "
                          f"{FORMAT_VERSION}): upgrade qcat (pip install -U qcat)")
    if found != FORMAT_VERSION:
        raise BundleError(f"{path}: bundle format {found!r} is not supported (expected {FORMAT_VERSION})")
    manifest = Manifest(directory, data)
    if verify:
        for name, expected in data["files"].items():
            if Path(name).name != name:
                raise BundleError(f"{path} lists a file outside the bundle: {name!r}")
            file_path = directory / name
            if not file_path.is_file():
                raise BundleError(f"model bundle {directory} is missing {name}")
            if sha256_file(file_path) != expected:
                raise BundleError(f"model bundle {directory}: {name} does not match its hash in {MANIFEST} (modified or corrupt)")
    return manifest


def unlisted_entries(manifest: Manifest, subbundles: set[str] = frozenset()) -> list[str]:
    """What the bundle directory holds besides its manifest, the files it lists and its
    ``subbundles`` (directories verified by their own manifests): names that loading ignores,
    sorted, a directory's with a trailing ``/``."""
    listed = set(manifest.data["files"]) | {MANIFEST}
    return sorted(entry.name + ("/" if entry.is_dir() else "") for entry in manifest.directory.iterdir()
                  if entry.name not in listed and not (entry.is_dir() and entry.name in subbundles))


def load_bundle_taxonomy(manifest: Manifest) -> Taxonomy:
    taxonomy = load_taxonomy(manifest.file(TAXONOMY_FILE), fmt="tsv")
    if taxonomy.content_hash != manifest.data.get("taxonomy_hash"):
        raise BundleError(f"model bundle {manifest.directory}: taxonomy hash does not match the manifest")
    return taxonomy


def load_arrays(manifest: Manifest, name: str) -> dict[str, np.ndarray]:
    """Load an ``.npz`` listed in the manifest, without pickle."""
    try:
        with np.load(manifest.file(name), allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError) as exc:
        raise BundleError(f"model bundle {manifest.directory}: cannot read {name}: {exc}") from None


def load_lines(manifest: Manifest, name: str) -> list[str]:
    try:
        text = manifest.file(name).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"model bundle {manifest.directory}: {name} is not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise BundleError(f"model bundle {manifest.directory}: cannot read {name}: {exc.strerror}") from None
    return text.split("\n") if text else []


def save_lines(path: Path, lines: list[str]) -> str:
    """Write one string per line (none may hold a newline); returns their hash."""
    if any("\n" in line for line in lines):
        raise ValueError("a line to save holds a newline")
    path.write_text("\n".join(lines), encoding="utf-8")
    return sha256_lines(lines)


def load_vocabulary(manifest: Manifest, name: str) -> list[str]:
    """A bundle's vocabulary file, checked against the manifest's vocabulary hash."""
    vocabulary = load_lines(manifest, name)
    if sha256_lines(vocabulary) != manifest.data.get("vocabulary_hash"):
        raise BundleError(f"model bundle {manifest.directory}: vocabulary hash does not match the manifest")
    return vocabulary


def load_labels(manifest: Manifest, name: str, taxonomy: Taxonomy) -> tuple[str, ...]:
    """A bundle's output labels; every one must be a node of its taxonomy."""
    labels = tuple(load_lines(manifest, name))
    unknown = [label for label in labels if label not in taxonomy]
    if unknown:
        raise BundleError(f"model bundle {manifest.directory}: labels not in its taxonomy: {unknown[:3]}")
    return labels
