"""Writing a report directory: report.json, report.md with plots/*.svg, and report.html."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

from qcat.errors import InputError


def clean_json(value):
    """NaN becomes null: the JSON file must parse everywhere, not only in Python."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def write_report_files(report: dict, out: Path, plots: dict[str, tuple[str, str]],
                       render_markdown: Callable[[dict, dict[str, str]], str],
                       render_html: Callable[[dict, dict[str, tuple[str, str]]], str]) -> list[Path]:
    """``plots`` maps a plot's title to (file name, SVG text); the renderers get the report and
    the plots (Markdown: title -> relative file)."""
    try:
        (out / "plots").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the report directory {out}: {exc}") from None
    for file_name, svg in plots.values():
        (out / "plots" / file_name).write_text(svg, encoding="utf-8")
    paths = [out / "report.json", out / "report.md", out / "report.html"]
    paths[0].write_text(json.dumps(clean_json(report), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    paths[1].write_text(render_markdown(report, {t: f"plots/{f}" for t, (f, _) in plots.items()}), encoding="utf-8")
    paths[2].write_text(render_html(report, plots), encoding="utf-8")
    return paths
