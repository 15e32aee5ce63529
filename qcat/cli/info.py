"""``qcat info DIR``: verify a bundle and print its manifest's summary (imports only the serving core)."""

from __future__ import annotations

import json

from qcat.models.overrides import OVERRIDES_FILE, has_overrides, with_overrides
from qcat.version import __version__


def describe_overrides(manifest, model) -> str:
    """The line on a bundle's judged overrides (checked against its model), or "" if it has none."""
    if not has_overrides(manifest):
        return ""
    overridden = with_overrides(model, manifest)
    return (f"{len(overridden.overrides):,} judged queries answered first with {overridden.categories:,} "
            f"categories judged Exact ({OVERRIDES_FILE}; qcat classify/serve --no-overrides: the model alone)")


def _unlisted(manifest) -> str:
    """``qcat info``'s note on entries of the bundle directory its manifest does not list (ignored)."""
    from qcat.bundles.bundle import unlisted_entries
    from qcat.errors import shown

    subbundles = set(manifest.data.get("parts", {}))
    if manifest.data.get("first_stage") is not None:
        from qcat.rerank.model import FIRST_DIR

        subbundles.add(FIRST_DIR)
    unlisted = unlisted_entries(manifest, subbundles)
    if not unlisted:
        return ""
    names = ", ".join(shown(name) for name in unlisted[:5]) + (f" and {len(unlisted) - 5:,} more" if len(unlisted) > 5 else "")
    return (f"; {len(unlisted):,} unlisted entr{'y' if len(unlisted) == 1 else 'ies'} present and ignored "
            f"(not in the manifest, not verified): {names}")


def run_info(args) -> int:
    from qcat.bundles.bundle import normalizer_mismatch, read_manifest
    from qcat.classifier import model_from_manifest
    from qcat.models.calibration import describe_scores
    from qcat.models.calibration.nodes import describe_nodes, load_node_calibration

    manifest = read_manifest(args.model)
    model = model_from_manifest(manifest)  # loads fully: catches inconsistent arrays too
    if args.json:
        print(json.dumps(manifest.data, indent=2, sort_keys=True))
        return 0
    data = manifest.data
    print(f"model bundle   {manifest.directory}")
    print(f"backend        {data['backend']}  (format {data['format_version']}, built by qcat {data.get('qcat_version')}; "
          f"read by qcat {__version__})")
    print(f"created        {data.get('created')}")
    print(f"normalizer     {data.get('normalizer', 1)}" + (f"  (warning: {mismatch})" if (mismatch := normalizer_mismatch(manifest))
                                                          else "  (this qcat's)"))
    print(f"labels         {len(model.labels):,} categories")
    vocabulary = data.get("vocabulary_hash")
    vocabulary = f"{vocabulary[:16]}…" if vocabulary else "none (its parts' are below)" if data.get("parts") else "none"
    print(f"taxonomy hash  {data['taxonomy_hash'][:16]}…   vocabulary hash {vocabulary}")
    print(f"files          {len(data['files'])}, all hashes verified{_unlisted(manifest)}")
    print(f"scores         {describe_scores(model)}")
    print(f"nodes          {describe_nodes(load_node_calibration(manifest))}")
    overrides = describe_overrides(manifest, model)
    if overrides:
        print(f"overrides      {overrides}")
    for name, digest in sorted(data.get("parts", {}).items()):
        print(f"part           {name}/  (manifest sha256 {digest[:16]}…, verified with its files)")
    if data["backend"] == "rerank":
        from qcat.rerank.model import FIRST_DIR

        first = data.get("first_stage", {})
        print(f"second stage   a learned re-ranker over the candidates of its first stage {FIRST_DIR}/ "
              f"({first.get('backend')}, manifest sha256 {str(first.get('manifest_sha256'))[:16]}…, verified with its "
              f"files), {len(model.trees.roots)} trees over {len(manifest.config.get('features', []))} features")
    for key, value in sorted(manifest.config.items()):
        print(f"config         {key} = {value}")
    for key, value in sorted(manifest.metrics.items()):
        if key != "tuning_grid":
            print(f"metric         {key} = {value}")
    return 0
