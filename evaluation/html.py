"""The report as one self-contained HTML page (inline CSS and SVG, no external files)."""

from __future__ import annotations

from html import escape

from qcat.evaluation.report import Table, header_lines, tables

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #1d2433; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #d8dde6; padding-bottom: .3rem; }
ul.meta { color: #4a5468; font-size: .9rem; padding-left: 1.2rem; }
table { border-collapse: collapse; margin: .6rem 0 .3rem; font-size: .88rem; }
th, td { padding: .28rem .6rem; border-bottom: 1px solid #e6e9ef; text-align: right; white-space: nowrap; }
th { background: #f3f5f9; font-weight: 600; }
td:first-child, th:first-child { text-align: left; }
td.pos { color: #137333; } td.neg { color: #b3261e; }
p.note { color: #4a5468; font-size: .82rem; max-width: 60rem; }
figure { display: inline-block; margin: .5rem 1rem .5rem 0; vertical-align: top; }
figcaption { font-size: .85rem; color: #4a5468; text-align: center; }
figure svg { max-width: 100%; height: auto; }
div.scroll { overflow-x: auto; }
"""


def _cell(value: str, is_delta: bool) -> str:
    css = ""
    if is_delta and value.startswith("+") and value.strip("+0.") != "":
        css = ' class="pos"'
    elif is_delta and value.startswith("-"):
        css = ' class="neg"'
    return f"<td{css}>{escape(value)}</td>"


def html_table(table: Table) -> str:
    is_delta = table.header[0] == "models"
    head = "".join(f"<th>{escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(_cell(v, is_delta and i >= 2) for i, v in enumerate(row)) + "</tr>"
                   for row in table.rows)
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    return (f'<h2>{escape(table.title)}</h2><div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{note}")


def _inline_svg(svg: str) -> str:
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def render_html(report: dict, plots: dict[str, tuple[str, str]]) -> str:
    return html_document("qcat evaluation report", header_lines(report), tables(report), plots)


def html_document(title: str, header: list[str], sections: list[Table], plots: dict[str, tuple[str, str]]) -> str:
    """One page: header bullets, the main tables, the plots (inline SVG), the detail tables."""
    meta = "".join(f"<li>{escape(line)}</li>" for line in header)
    figures = "".join(f"<figure>{_inline_svg(svg)}<figcaption>{escape(name)}</figcaption></figure>"
                      for name, (_, svg) in plots.items())
    first = "".join(html_table(t) for t in sections if not t.detail)
    rest = "".join(html_table(t) for t in sections if t.detail)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><ul class=\"meta\">{meta}</ul>"
        f"{first}<h2>Plots</h2>{figures}{rest}</body></html>\n"
    )
