"""Property test of the input layer over every file kind a reader declares (issue 45): files are
generated from each kind's schema, row by row, each row drawn good or broken in a known way, and
what the layer reads is checked against what the generator knows it wrote (the oracle): which
lines are rows, which are skipped and why, each value typed, and the first bad line named when
refusing. The generator writes files with the csv module (or raw where a kind reads quotes as
text) and never calls the layer's code."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qcat.errors import InputError
from qcat.inputs import COMMENTS_ANYWHERE, COMMENTS_BEFORE_HEADER, REFUSE, SKIP, FileSchema, read_table
from qcat.text.normalize import normalize
from tests.test_inputs import READERS


def schemas() -> list[tuple[str, FileSchema]]:
    out = []
    for module_name, (_, names) in READERS.items():
        module = __import__(module_name, fromlist=["_"])
        out += [(f"{module_name}.{name}", getattr(module, name)) for name in names]
    return out


SCHEMAS = schemas()
WORDS = ["lego", "tv", "TV", "Sharp", "car", "#1", "dad", "mug", "\"Sheriff\"", "rock'n'roll", "été", "x,y", "a\"b"]


def good_value(draw, column) -> tuple[str, object]:
    """A cell's text and the value the layer must read from it."""
    if column.kind == "query":
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
        text = " ".join(words)
        if not normalize(text):
            text += " lego"
        return text, text.strip()
    if column.kind == "int":
        low = int(max(column.low, -10**6)) if column.low is not None else -10**6
        high = int(min(column.high, 10**6)) if column.high is not None else 10**6
        value = draw(st.integers(low, high))
        return draw(st.sampled_from([str(value), f" {value} ", f"+{value}" if value >= 0 else str(value)])), value
    if column.kind == "number":
        low = column.low if column.low is not None else -1e6
        value = draw(st.floats(low, 1e6, allow_nan=False))
        text = draw(st.sampled_from([repr(value), f"{value:g}", f"{value:.3e}"]))
        return text, float(text)
    if column.kind == "choice":
        choice = draw(st.sampled_from(column.choices))
        return draw(st.sampled_from([choice, choice.upper(), f" {choice} "])), choice
    text = draw(st.sampled_from(["L1", "Toys > Lego", "abc 12", "K010/other", "Food"]))
    return text, text


def bad_value(draw, column) -> tuple[str, str] | None:
    """A cell the column must refuse, with the layer's reason key; None where no cell is wrong."""
    if column.kind == "query":
        return draw(st.sampled_from([("!!!", "empty_query"), ("q" * 4001, "query_too_long")]))
    if column.kind == "int":
        high = column.high if column.high is not None and column.high < 10**18 else None
        options = ["abc", "2.5", "nan", "1e309", ""] + ([str(int(high) + 1)] if high is not None else [])
        text = draw(st.sampled_from(options))
        return text, (f"empty_{column.name}" if text == "" and column.required else f"bad_{column.name}")
    if column.kind == "number":
        options = ["abc", "nan", "inf", "-inf", "1e999"] + (["-1"] if column.low is not None and column.low >= 0 else [])
        return draw(st.sampled_from(options)), f"bad_{column.name}"
    if column.kind == "choice":
        return "middle", f"bad_{column.name}"
    if column.required:
        return "", f"empty_{column.name}"
    return None


def render(cells: list[str], delimiter: str | None, schema: FileSchema) -> str:
    if delimiter is None:
        return cells[0]
    if not schema.quoting or any(c.startswith('"') and not c.endswith('"') for c in cells) and schema.literal_quotes:
        return delimiter.join(cells)  # the kind reads quotes as text: written as is
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="").writerow(cells)
    return buffer.getvalue()


@st.composite
def files(draw, schema: FileSchema):
    """``(text, expected)``: a file of the kind and, per line, what the layer must make of it."""
    delimiter = schema.delimiter
    columns = list(schema.columns)
    has_header = schema.header == "required" or (schema.header == "optional" and draw(st.booleans()))
    used = columns if not has_header else \
        [c for c in columns if c.required or draw(st.booleans())]
    if has_header and schema.header == "required":  # an optional header is known by its first name
        used = draw(st.permutations(used))
    lines: list[str] = []
    expected: list[tuple[int, str, object]] = []  # (line, "row"|"skip"|"blank"|"comment"|"header", detail)
    directives = {}
    if schema.comments in (COMMENTS_BEFORE_HEADER, COMMENTS_ANYWHERE) and draw(st.booleans()):
        lines.append("# a comment")
        expected.append((len(lines), "comment", None))
        for directive in schema.directives:
            if directive.kind == "int" and draw(st.booleans()):
                value = draw(st.integers(int(directive.low), int(directive.high)))
                lines.append(f"# {directive.name}: {value}")
                expected.append((len(lines), "comment", None))
                directives[directive.name] = value
    if has_header:
        names = [draw(st.sampled_from([c.name, c.name.upper(), c.name.title()])) for c in used]
        if delimiter is not None and draw(st.booleans()):
            names.append("notes")  # a column for people
        lines.append(render(names, delimiter, schema))
        expected.append((len(lines), "header", None))
    width = len(used) + (1 if has_header and lines[-1].endswith("notes") else 0)
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["row", "row", "row", "bad", "blank", "fields"]))
        if kind == "blank":
            lines.append(draw(st.sampled_from(["", "  "])))
            expected.append((len(lines), "blank", None))
            continue
        cells, values = [], {}
        for column in used:
            text, value = good_value(draw, column)
            cells.append(text)
            values[column.name] = value
        if width > len(used):
            cells.append("for people")
        reason = None
        if kind == "bad":
            candidates = [i for i, c in enumerate(used) if bad_value(draw, c) is not None]
            if not candidates:
                kind = "row"
            else:
                i = draw(st.sampled_from(candidates))
                cells[i], reason = bad_value(draw, used[i])
        if kind == "fields" and delimiter is not None and not schema.short_rows:
            cells = cells + ["extra"]
            reason = "wrong_fields"
        elif kind == "fields":
            kind = "row"
        if schema.comments == COMMENTS_ANYWHERE and cells[0].lstrip().startswith("#"):
            cells[0] = "L" + cells[0]
            if used[0].kind == "query":
                values[used[0].name] = cells[0].strip()
        if schema.header == "optional" and not has_header and not any(e[1] in ("row", "skip") for e in expected) \
                and cells[0].strip().lower() == columns[0].name:
            cells[0] = "x" + cells[0]
        line = render(cells, delimiter, schema)
        if not line.strip():  # a row of empty cells reads as a blank line
            lines.append(line)
            expected.append((len(lines), "blank", None))
            continue
        lines.append(line)
        expected.append((len(lines), "skip" if reason else "row", reason or values))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    bom = "\ufeff" if draw(st.booleans()) else ""
    final = bool(lines) and (lines[-1] == "" or draw(st.booleans()))  # an empty last line needs its line end
    text = bom + ending.join(lines) + (ending if final else "")
    return text, expected, directives, used


def suffix_of(schema: FileSchema) -> str:
    for suffix, delimiter in schema.delimiters.items():
        if delimiter == schema.delimiter:
            return suffix
    return {"\t": ".tsv", ",": ".csv", None: ".txt"}[schema.delimiter]


def same(value: object, wanted: object) -> bool:
    if isinstance(wanted, float):
        return isinstance(value, float) and math.isclose(value, wanted, rel_tol=1e-12)
    return value == wanted


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=[name for name, _ in SCHEMAS])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_every_file_kind_reads_as_its_generator_wrote_it(tmp_path_factory, name, schema, data) -> None:
    text, expected, directives, used = data.draw(files(schema))
    path = tmp_path_factory.mktemp("inputs") / f"file{suffix_of(schema)}"
    path.write_bytes(text.encode("utf-8"))
    rows = [(line, detail) for line, kind, detail in expected if kind == "row"]
    skipped = [(line, detail) for line, kind, detail in expected if kind == "skip"]
    try:
        table = read_table(path, schema, on_bad=SKIP, allow_empty=True)
    except InputError as exc:
        raise AssertionError(f"{name}: refused a file with no bad header or directive: {exc}\n{text!r}") from None
    assert [row.line for row in table.rows] == [line for line, _ in rows], text
    assert [(s.line, s.reason) for s in table.skipped] == skipped, text
    assert table.blank == [line for line, kind, _ in expected if kind == "blank"]
    assert table.comment_lines == sum(kind == "comment" for _, kind, _ in expected)
    assert table.lines == len(expected)
    assert table.directives == directives
    for row, (_, values) in zip(table.rows, rows):
        for column, wanted in values.items():
            assert same(row[column], wanted), (column, row[column], wanted)
        if row.query is not None:
            assert row.query.normalized == normalize(row.query.text) != ""
    refusing = None
    try:
        read_table(path, schema, on_bad=REFUSE, allow_empty=True)
    except InputError as exc:
        refusing = str(exc)
    if skipped:
        assert refusing is not None and f"{path}:{skipped[0][0]}: " in refusing, refusing
    else:
        assert refusing is None, refusing


@pytest.mark.parametrize(("name", "schema"), [(n, s) for n, s in SCHEMAS if s.header == "required"],
                         ids=[n for n, s in SCHEMAS if s.header == "required"])
def test_every_kind_with_a_header_refuses_a_declared_column_named_twice(tmp_path, name, schema) -> None:
    column = schema.columns[0].name
    names = [c.name for c in schema.columns if c.required] + [column.upper()]
    (tmp_path / f"f{suffix_of(schema)}").write_text((schema.delimiter or ",").join(names) + "\n")
    with pytest.raises(InputError, match=rf"f\.\w+:1: the header names the column '{column}' twice"):
        read_table(tmp_path / f"f{suffix_of(schema)}", schema)


def test_checks_md_lists_every_file_kinds_rules_as_the_schema_declares_them() -> None:
    from qcat.inputs.schema import describe_schema

    page = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "checks.md").read_text(encoding="utf-8")
    missing = [name for name, schema in SCHEMAS if describe_schema(schema) not in page]
    assert missing == [], "docs/guide/checks.md is out of step with these schemas: " + ", ".join(missing)


def weight_texts():
    """``--judged-weight`` texts around and between its bounds (issue 53 item 1), as people write numbers."""
    from qcat.training.data.judged import MAX_JUDGED_WEIGHT, MIN_JUDGED_WEIGHT

    edges = st.sampled_from([MIN_JUDGED_WEIGHT, MAX_JUDGED_WEIGHT, 0.0, 1e39, 1e308, 1e-300, 2.0 ** 24, -1.0])
    near = edges.map(lambda v: v * (1 + 1e-9)) | edges.map(lambda v: v * (1 - 1e-9))
    values = st.floats(allow_nan=True, allow_infinity=True) | st.floats(-10.0, 2e6) | edges | near
    return st.tuples(values, st.sampled_from(["{!r}", "{:g}", "{:.3e}", "{:.0f}"])).map(
        lambda pair: pair[1].format(pair[0]))


@settings(max_examples=300, deadline=None)
@given(text=weight_texts())
def test_judged_weight_takes_exactly_the_weights_a_float32_click_table_holds(text) -> None:
    """Every train action's ``--judged-weight`` parser takes a weight iff it lies in the bounds, names
    them when it refuses, and what it takes (and an acceptable pair's half) is finite and exact to
    float32's precision, a whole number exactly."""
    import argparse

    import numpy as np

    from qcat.training.commands.judged import _positive
    from qcat.training.data.judged import ACCEPTABLE_SHARE, MAX_JUDGED_WEIGHT, MIN_JUDGED_WEIGHT

    value = float(text)
    inside = math.isfinite(value) and MIN_JUDGED_WEIGHT <= value <= MAX_JUDGED_WEIGHT
    try:
        weight = _positive(text)
    except argparse.ArgumentTypeError as exc:
        assert not inside, (text, str(exc))
        assert f"from {MIN_JUDGED_WEIGHT:g} to {MAX_JUDGED_WEIGHT:,.0f}, got {text}" in str(exc)
        return
    assert inside and weight == value
    for clicks in (weight, weight * ACCEPTABLE_SHARE):
        held = float(np.float32(clicks))
        assert math.isfinite(held) and held > 0 and math.isclose(held, clicks, rel_tol=2.0 ** -23)
        if clicks == int(clicks):
            assert held == clicks
