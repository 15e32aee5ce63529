"""A loaded, verified bundle and its identity; loading a new one next to the running one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from qcat.bundles.bundle import MANIFEST, sha256_file
from qcat.classifier import Classifier, default_model_dir
from qcat.errors import BundleError
from qcat.models.overrides import OverriddenModel
from qcat.serve.config import ServeConfig
from qcat.version import __version__


@dataclass(frozen=True)
class LoadedModel:
    """A classifier plus what identifies it: a request keeps the one it started with."""

    classifier: Classifier
    configured: Path  # the --model path as given (it may be a symlink that a deploy repoints)
    bundle_hash: str  # sha256 of manifest.json, which holds the hash of every file of the bundle
    loaded_at: str
    load_seconds: float

    @property
    def identity(self) -> dict:
        return {"backend": self.classifier.model.backend, "bundle_hash": self.bundle_hash}

    def summary(self) -> dict:
        model = self.classifier.model
        manifest = self.classifier.manifest
        summary = {
            "backend": model.backend,
            "directory": str(self.configured),
            "resolved_directory": str(self.classifier.directory),
            "bundle_hash": self.bundle_hash,
            "taxonomy_hash": manifest.data.get("taxonomy_hash"),
            "created": manifest.data.get("created"),
            "qcat_version": manifest.data.get("qcat_version"),  # the qcat that built the bundle
            "served_by": f"qcat {__version__}",
            "labels": len(model.labels),
            "node_calibration": self.classifier.nodes is not None,  # whether it answers `precision`
            "loaded_at": self.loaded_at,
            "load_seconds": round(self.load_seconds, 4),
        }
        if isinstance(model, OverriddenModel):
            summary["overrides"] = len(model.overrides)
        if model.backend == "hybrid":
            summary |= {"cutoff": model.cutoff, "route_to": model.route_to, "blend": model.blend,
                        "long_backend": model.long_backend,
                        "long_shares": dict(zip(model.parts[1:], model.long_shares))}
        if model.backend == "rerank":
            summary |= {"second_stage": {"backend": "rerank", "first_stage": model.first.backend,
                                         "candidates": model.depth, "neighbours": model.neighbours,
                                         "trees": len(model.trees.roots)}}
        return summary


def load(config: ServeConfig) -> LoadedModel:
    """Load and verify the bundle ``config`` names, and make its single-query path ready (no
    request pays for compiling it). The path is resolved once, so a symlink
    repointed during the load cannot mix two bundles; a manifest that changes while loading
    is refused."""
    configured = config.model if config.model is not None else default_model_dir()
    directory = Path(configured).resolve()
    started = time.perf_counter()
    before = _manifest_hash(directory)
    classifier = Classifier.load(directory, backend=config.backend, cutoff=config.cutoff,
                                 overrides=config.overrides).compile()
    if _manifest_hash(directory) != before:
        raise BundleError(f"model bundle {directory} changed while it was being loaded; try again")
    return LoadedModel(classifier, Path(configured), before,
                       datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                       time.perf_counter() - started)


def _manifest_hash(directory: Path) -> str:
    try:
        return sha256_file(directory / MANIFEST)
    except FileNotFoundError:
        if not directory.is_dir():
            raise BundleError(f"model directory {directory} does not exist") from None
        raise BundleError(f"{directory} is not a model bundle: no {MANIFEST}") from None
    except OSError as exc:
        raise BundleError(f"cannot read {directory / MANIFEST}: {exc.strerror}") from None
