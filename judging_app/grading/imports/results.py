"""``--results``: both systems' result lists, from one file or two, read as an :class:`Imported`
session (which system is which, every line accounted for, a system with no usable row refused),
and the rows skipped reported."""

from __future__ import annotations

from pathlib import Path

from qcat.errors import InputError, shown
from qcat.inputs.paths import check_file
from qcat.judging.grading.imports.files import TREC_SUFFIXES, cell_text, read_records
from qcat.judging.grading.imports.queries import Imported, assemble
from qcat.judging.grading.imports.rows import Row, checked_row

MAX_BAD_SHOWN = 20


def read_results(paths: list[Path], default_segment: str | None = None, topics: dict[str, str] | None = None,
                 listings: dict[str, dict] | None = None) -> Imported:
    """Both systems' result lists from one file (holding exactly two ``system`` values, the first
    seen being the baseline) or two files (the first the baseline, the second the target)."""
    if not 1 <= len(paths) <= 2:
        raise InputError(f"give the result lists of two systems: --results BASELINE --results TARGET, or one file "
                         f"with a system column; got {len(paths)} --results")
    rows: list[Row] = []
    bad: list[str] = []
    file_systems: list[list[str]] = []
    lines = {"lines": 0, "header": 0, "blank": 0}
    for index, path in enumerate(paths):
        path = Path(path)
        check_file(path, "--results")
        seen: list[str] = []
        if path.suffix.lower() in (".csv", ".tsv"):
            lines["header"] += 1  # read_records refuses a file without one
            lines["lines"] += 1
        for number, record in read_records(path, topics=topics, listings=listings):
            lines["lines"] += 1  # one record, bad row or blank line per line after the header
            if record is None:
                lines["blank"] += 1
                continue
            try:
                if isinstance(record, Exception):
                    raise record
                if listings and not path.suffix.lower() in TREC_SUFFIXES:
                    record = {**listings.get(cell_text(record.get("listing_id")), {}),
                              **{k: v for k, v in record.items() if v not in (None, "")}}
                row = checked_row(path, number, record, default_system=path.stem if len(paths) == 2 else "")
            except ValueError as exc:
                bad.append(f"{path}:{number}: {exc}")
                continue
            if not row.system:
                bad.append(f"{path}:{number}: no system (one file holds both systems: give each row's system)")
                continue
            if row.system not in seen:
                seen.append(row.system)
            rows.append(row)
        file_systems.append(seen)
    if len(paths) == 2:
        for path, seen in zip(paths, file_systems):
            if len(seen) > 1:
                raise InputError(f"{path}: one --results file per system, but it holds the systems "
                                 f"{', '.join(map(shown, seen))}")
        if not file_systems[0] or not file_systems[1]:
            empty = paths[0] if not file_systems[0] else paths[1]
            raise InputError(f"--results {empty}: no usable row" + skipped_rows(bad, empty))
        systems = (file_systems[0][0], file_systems[1][0])
        if systems[0] == systems[1]:
            systems = (f"{systems[0]} ({Path(paths[0]).name})", f"{systems[1]} ({Path(paths[1]).name})")
        system_of = {id(row): systems[0] if row.file == str(paths[0]) else systems[1] for row in rows}
    else:
        seen = file_systems[0]
        if not seen:
            raise InputError(f"--results {paths[0]}: no usable row" + skipped_rows(bad, paths[0]))
        if len(seen) != 2:
            raise InputError(f"{paths[0]}: one --results file must hold exactly two systems (the system column), "
                             f"found {len(seen)}: {', '.join(map(shown, seen))}")
        systems = (seen[0], seen[1])
        system_of = {id(row): row.system for row in rows}
    imported = assemble(rows, system_of, systems, bad, default_segment)
    imported.lines, imported.header_lines, imported.blank_lines = lines["lines"], lines["header"], lines["blank"]
    imported.check_lines()
    for side, system in enumerate(systems):
        if not any(query.target if side else query.baseline for query in imported.queries):
            # every row of this system was skipped while the lists were put together (a segment
            # that contradicts the other system's rows, a rank given twice)
            where = f"--results {paths[side]}" if len(paths) == 2 else f"--results {paths[0]}: system {shown(system)}"
            raise InputError(f"{where}: no usable row, so the session would judge {shown(system)} on no results"
                             + skipped_rows(bad, Path(paths[side] if len(paths) == 2 else paths[0])))
    return imported


def skipped_rows(bad: list[str], path: Path, shown_rows: int = 3) -> str:
    """The rows of ``path`` that were skipped, with why, for an error that says none was usable."""
    mine = [message for message in bad if message.startswith(f"{path}:")]
    if not mine:
        return " (the file holds no data rows)"
    listed = "; ".join("line " + message.removeprefix(f"{path}:") for message in mine[:shown_rows])
    more = f"; and {len(mine) - shown_rows:,} more" if len(mine) > shown_rows else ""
    return f": {len(mine):,} rows skipped: {listed}{more}"


def report_bad_rows(imported: Imported, say) -> None:
    """Every row that could not be used, by file and line (the first :data:`MAX_BAD_SHOWN`, then a count),
    and the queries written several ways that were matched as one."""
    for message in imported.bad_rows[:MAX_BAD_SHOWN]:
        say(f"skipped {message}")
    if len(imported.bad_rows) > MAX_BAD_SHOWN:
        say(f"... and {len(imported.bad_rows) - MAX_BAD_SHOWN:,} more rows skipped")
    if imported.merged:
        examples = "; ".join(" = ".join(shown(form) for form in forms) for forms in imported.merged[:3])
        say(f"matched {len(imported.merged):,} quer{'y' if len(imported.merged) == 1 else 'ies'} written in several "
            f"ways as one (qcat's normalized query), each shown as first written (e.g. {examples})")
