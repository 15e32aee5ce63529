"""The audit's files: ``confusable.tsv`` (the map, editable), ``report.json`` and ``report.md``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from qcat.taxonomy.confusable import FILE_NAME, HEADER
from qcat.training.audit.confusable_pairs import Audit
from qcat.training.audit.gold_check import plural

TSV_COLUMNS = (HEADER, "leaf_b", "path_a", "path_b", "confusions", "lift", "confusion_rate", "shared_texts",
               "split_texts", "share_of_errors", "split_lift", "evidence")
SHOWN = 40  # pairs the Markdown report lists


def to_json(audit: Audit, source: dict, gold: dict | None = None) -> dict:
    return ({} if gold is None else {"gold": gold}) | {
        "data": source,
        "settings": vars(audit.settings),
        "training_queries": audit.queries,
        "categories": len(audit.categories),
        "cross_fitted": {"held_out_queries": audit.held_out_queries, "errors": audit.held_out_errors,
                         "error_rate": round(audit.held_out_errors / max(audit.held_out_queries, 1), 5)},
        "confusable_pairs": len(audit.confusable),
        "nothing_mapped": audit.nothing_mapped(),  # why the map holds no pair, else None
        "errors_explained_by_the_map": round(audit.explained_share(), 5),
        "hubs": audit.hubs,
        "pairs": audit.pairs,
    }


def tsv_text(audit: Audit, command: str) -> str:
    lines = [f"# qcat data audit: leaves the training data cannot tell apart ({len(audit.confusable)} pairs).",
             f"# Made by: {command}",
             "# The first two columns are the two leaves' ids; the rest is evidence for people. Delete a line to stop",
             "# crediting a pair, add one (two ids, tab-separated) to credit it; qcat evaluate --confusable reads it.",
             *([] if audit.confusable else [f"# No pair: {audit.nothing_mapped()}."]),
             "\t".join(TSV_COLUMNS)]
    for pair in audit.confusable:
        lines.append("\t".join(str(pair[c] if c != HEADER else pair["leaf_a"]) for c in TSV_COLUMNS))
    return "\n".join(lines) + "\n"


def gold_section(gold: dict) -> list[str]:
    """``--gold FILE``: the map against people's grades (:mod:`qcat.training.audit.gold_check`)."""
    share = "–" if gold["explained_share"] is None else f"{gold['explained_share']:.1%}"

    def listed(kind: str) -> list[str]:
        return [f"  - {cell(query)}: {cell(a)} and {cell(b)}" for query, a, b in gold["examples"][kind]] or ["  - none"]

    return [
        f"## Against people's grades ({cell(gold['source'])})", "",
        f"- {gold['queries']:,} graded queries (sha256 {gold['sha256'][:12]}); {gold['map_pairs_graded']:,} of the "
        f"map's {gold['map_pairs']:,} pairs have both leaves graded for some query.",
        f"- Human-acceptable disagreements (two categories graded exact, or one graded exact and another graded "
        f"acceptable; on a query with no exact category, two acceptable ones): {gold['disagreements']:,} on "
        f"{gold['disagreement_queries']:,} queries ({gold['distinct_disagreements']:,} distinct leaf pairs). "
        f"The map pairs {gold['explained']:,} of them ({share}; {gold['explained_distinct']:,} distinct pairs).",
        f"- Rejected: {plural(gold['rejected'], 'time')}, on {plural(gold['rejected_queries'], 'query', 'queries')}, "
        f"one leaf of a map pair is the query's exact category (else its acceptable one) and the other is graded "
        f"wrong or related ({plural(gold['rejected_pairs'], 'distinct map pair')}).",
        "- Explained, e.g.:", *listed("explained"),
        "- Not explained (pairs the map might add), e.g.:", *listed("not_explained"),
        "- Rejected (pairs the map might drop), e.g.:", *listed("rejected"), ""]


def markdown(audit: Audit, source: dict, command: str, gold: dict | None = None) -> str:
    s = audit.settings
    rows = ["| # | leaf A | leaf B | confusions (A→B / B→A) | lift | rate | shared texts (split) | split lift | "
            "share of errors | in map (by) | examples |", "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|"]

    def times(lift: float | None) -> str:
        return "∞" if lift is None else f"{lift:.1f}"

    for i, p in enumerate(audit.pairs[:SHOWN], start=1):
        in_map = f"yes ({p['evidence']})" if p["confusable"] else "no"
        rows.append(f"| {i} | {cell(p['path_a'])} | {cell(p['path_b'])} | {p['confusions']} ({p['a_as_b']} / "
                    f"{p['b_as_a']}) | {times(p['lift'])} | {100 * p['confusion_rate']:.1f}% | {p['shared_texts']} "
                    f"({p['split_texts']}) | {times(p['split_lift'])} | {100 * p['share_of_errors']:.2f}% | {in_map} | "
                    f"{cell('; '.join(p['examples']))} |")
    hubs = [f"- {cell(h['path'])}: {h['partners']} partners ({cell('; '.join(h['partner_paths'][:6]))}"
            f"{'…' if h['partners'] > 6 else ''})" for h in audit.hubs] or ["- none"]
    where = source.get("log") or source.get("corpus") or "the data"
    return "\n".join([
        "# Confusable leaves (qcat data audit)", "",
        f"- Data: {cell(str(where))}, its training split only: {audit.queries:,} queries over "
        f"{len(audit.categories):,} categories.",
        f"- A fast model (Naive Bayes, fixed settings) cross-fitted over {s.folds} folds missed "
        f"{audit.held_out_errors:,} of {audit.held_out_queries:,} held-out queries "
        f"({audit.held_out_errors / max(audit.held_out_queries, 1):.1%}).",
        f"- {len(audit.confusable)} pairs are confusable (≥ {s.min_shared} texts clicked under both, and at least "
        f"{s.min_confusions} cross-fitted confusions, or at least {s.min_confusions} split texts, at a lift ≥ "
        f"{s.min_lift:g} over chance on ≥ {100 * s.min_rate:g}% of the two leaves' queries); together they explain "
        f"{audit.explained_share():.1%} of the cross-fitted errors.",
        *([] if audit.confusable else [f"- Nothing mapped: {cell(audit.nothing_mapped())}."]),
        f"- Made by: `{command}`", "",
        f"## Pairs, ranked (first {min(SHOWN, len(audit.pairs))} of {len(audit.pairs):,} with evidence)", "",
        *rows, "",
        "confusions: held-out queries of one leaf answered with the other; lift: against what chance predicts (a "
        "leaf's misses landing on the other as often as the model answers it at all); rate: confusions over both leaves' held-out queries; "
        "shared texts: training queries (and titles) clicked under both leaves, (split): of them, those where each "
        "leaf has at least 20% of the clicks; split lift: split texts against chance (a leaf's split texts pairing it "
        "with the other as often as the other is any query's leaf). A split text is never a confusion (either answer "
        "is a clicked leaf), so split texts are evidence of their own.", "",
        f"## Leaves with more than {s.max_partners} confusable partners (findings, not credited)", "",
        *hubs, "",
        *([] if gold is None else gold_section(gold)),
        f"`{FILE_NAME}` holds the map: edit it as your team agrees or not, then "
        f"`qcat evaluate --confusable {FILE_NAME}` reports lenient top-1 with it.", ""])


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_audit(audit: Audit, out: Path, source: dict, command: str, gold: dict | None = None) -> list[Path]:
    """Write the three files into ``out`` (a directory, created); returns their paths. ``gold``: the
    map against a graded gold (``--gold``), a section of both reports."""
    out.mkdir(parents=True, exist_ok=True)
    files = {FILE_NAME: tsv_text(audit, command),
             "report.json": json.dumps(to_json(audit, source, gold), indent=2) + "\n",
             "report.md": markdown(audit, source, command, gold)}
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    if not audit.confusable:  # said where the command's user reads it, not only in the files
        print(f"nothing mapped: {audit.nothing_mapped()}", file=sys.stderr)
    return [out / name for name in files]
