"""MkDocs hook: the pages that are generated from the code, so that they cannot drift from it.

A page holds a marker comment on a line of its own, which this hook replaces with generated Markdown when the site is
built (``mkdocs build``, ``mkdocs serve``):

- ``<!-- qcat:cli -->``: the command-line reference, from qcat's argparse parsers. The top-level
  parser comes from ``qcat.cli.build_parser``; each command that ``qcat.cli.DELEGATED`` hands to
  another package (``data``, ``train``, ``evaluate``, ``golden``, ``db``, ``judge``) comes from
  that module's ``build_parser(command)``, the parser its ``main`` parses with. Every subcommand is rendered,
  recursively: usage, description and a table of its options per argument group.
- ``<!-- qcat:http -->``: the HTTP API, from ``qcat.serve.openapi.openapi_document``, the
  OpenAPI document ``qcat serve`` serves at ``/openapi.json`` (with ``qcat serve``'s default
  limits). The document itself is published beside the page as ``openapi.json``.
- ``<!-- qcat:python -->``: the Python API, from the docstrings and signatures of the modules
  listed in mkdocs.yml under ``extra.python_api`` (``inspect``; nothing is imported but them).
- ``<!-- qcat:readme SECTION -->``: a section of README.md (``intro``: the text before its first
  heading), so the README and the site's home page say the same thing once.

tests/test_docs_site.py builds the site with ``--strict`` and uses :func:`command_parsers` to
check that every ``qcat`` command line in the guide parses.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- qcat:(cli|http|python|readme)(?: ([^>]*?))? -->$", re.M)  # a line of its own
WIDTH = 96  # the usage lines' width


# --------------------------------------------------------------------------- the command line

def command_parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """qcat's top-level parser, and the parser of each command that ``qcat.cli`` delegates to
    another package, by command name: each such module's ``build_parser(command)``, the very
    parser its ``main`` parses with."""
    from qcat import cli

    delegated = {command: importlib.import_module(module_name).build_parser(command)
                 for command, (module_name, _) in cli.DELEGATED.items()}
    return cli.build_parser(), delegated


def parse_command_line(argv: list[str]) -> argparse.Namespace:
    """Parse ``qcat ARGV...`` as ``qcat.cli.main`` does (without running it); a usage error raises
    (qcat's parsers raise ``qcat.errors.InputError``)."""
    top, delegated = command_parsers()
    if argv[:1] == ["--quiet"]:
        argv = argv[1:]
    if argv and argv[0] in delegated:
        return delegated[argv[0]].parse_args(argv[1:])
    return top.parse_args(argv)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, sub, helps.get(name) or ""))
    return found


def _cell(text: str) -> str:
    text = " ".join(str(text).split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def _code(text: str) -> str:
    text = " ".join(str(text).split())
    ticks = "``" if "`" in text else "`"
    pad = " " if ticks == "``" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}".replace("|", "\\|")


def _slug(prog: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", prog.lower()).strip("-")


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _options_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> list[str]:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    exclusive = {id(action): group for group in parser._mutually_exclusive_groups for action in group._group_actions}
    rows = []
    for action in actions:
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        invocation = formatter._format_action_invocation(action)
        described = formatter._expand_help(action) if action.help else ""
        if id(action) in exclusive:
            others = [other.option_strings[0] for other in exclusive[id(action)]._group_actions
                      if other is not action and other.option_strings]
            described += f" (not with {', '.join(others)})" if others else ""
        if action.required and action.option_strings:
            described += " (required)"
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or default == [] else _code(default)
        rows.append((_code(invocation), _cell(described), shown))
    if not rows:
        return []
    if any(shown for _, _, shown in rows):
        return ["| argument | what | default |", "|---|---|---|", *(f"| {a} | {w} | {d} |" for a, w, d in rows), ""]
    return ["| argument | what |", "|---|---|", *(f"| {a} | {w} |" for a, w, _ in rows), ""]


def _render_parser(parser: argparse.ArgumentParser, help_text: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} {parser.prog} {{#{_slug(parser.prog)}}}", ""]
    if parser.description or help_text:
        lines += [_cell(parser.description or help_text).replace("\\|", "|"), ""]
    lines += ["```text", _usage(parser), "```", ""]
    for group in parser._action_groups:
        table = _options_table(parser, group._group_actions)
        if not table:
            continue
        title = {"positional arguments": "Arguments", "options": "Options"}.get(group.title, group.title)
        lines += [f"**{title[:1].upper() + title[1:]}**", ""]
        if group.description:
            lines += [group.description, ""]
        lines += table
    subcommands = _subcommands(parser)
    if subcommands:
        lines += ["| command | what |", "|---|---|"]
        lines += [f"| [`{sub.prog}`](#{_slug(sub.prog)}) | {_cell(text)} |" for _, sub, text in subcommands]
        lines.append("")
    return lines


def cli_reference() -> str:
    top, delegated = command_parsers()
    lines = _render_parser(top, "", 2)
    for name, sub, help_text in _subcommands(top):
        sub = delegated.get(name, sub)
        lines += _render_parser(sub, help_text, 2)
        for _, subsub, subhelp in _subcommands(sub):
            lines += _render_parser(subsub, subhelp, 3)
            for _, leaf, leaf_help in _subcommands(subsub):
                lines += _render_parser(leaf, leaf_help, 4)
    return "\n".join(lines)


def cli_commands() -> list[str]:
    """Every command the reference documents, as ``qcat train nb``."""
    top, delegated = command_parsers()
    found = []

    def walk(parser):
        for _, sub, _ in _subcommands(parser):
            found.append(sub.prog)
            walk(sub)

    for name, sub, _ in _subcommands(top):
        sub = delegated.get(name, sub)
        found.append(sub.prog)
        walk(sub)
    return found


# --------------------------------------------------------------------------- the HTTP API

def openapi() -> dict:
    from qcat.serve.config import ServeConfig
    from qcat.serve.openapi import openapi_document

    return openapi_document(ServeConfig())


def _schema_type(schema: dict) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#schema-{name.lower()})"
    if "oneOf" in schema:
        return " or ".join(_schema_type(s) for s in schema["oneOf"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and "items" in schema:
        kind = f"array of {_schema_type(schema['items'])}"
    return kind


def _constraints(schema: dict) -> str:
    said = []
    for key, name in (("minimum", "min"), ("maximum", "max"), ("minItems", "min items"), ("maxItems", "max items"),
                      ("default", "default")):
        if key in schema:
            said.append(f"{name} {json.dumps(schema[key])}")
    return ", ".join(said)


def _described(schema: dict) -> str:
    constraints = _constraints(schema)
    return " ".join(part for part in (_cell(schema.get("description", "")), f"({constraints})" if constraints else "") if part)


def _properties_table(schema: dict) -> list[str]:
    required = set(schema.get("required", ()))
    rows = ["| field | type | required | what |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        what = _described(prop)
        rows.append(f"| `{name}` | {_schema_type(prop)} | {'yes' if name in required else 'no'} | {what} |")
    if schema.get("additionalProperties") is False:
        rows.append("")
        rows.append("No other field is accepted.")
    return rows + [""]


def _body_lines(content: dict) -> list[str]:
    lines = []
    for media, body in content.items():
        schema = body.get("schema", {})
        lines.append(f"`{media}`: {_schema_type(schema)}")
        if schema.get("properties"):
            lines += ["", *_properties_table(schema)]
    return lines


def http_reference() -> str:
    doc = openapi()
    lines = [f"OpenAPI {doc['openapi']}, *{doc['info']['title']}* {doc['info']['version']}. "
             "The document itself: [openapi.json](openapi.json) (with `qcat serve`'s default limits; "
             "a running service serves its own at `GET /openapi.json`).", "",
             doc["info"].get("description", ""), ""]
    lines += ["| method | path | what |", "|---|---|---|"]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            anchor = _slug(f"{method} {path}")
            lines.append(f"| {method.upper()} | [`{path}`](#{anchor}) | {_cell(op.get('summary', ''))} |")
    lines.append("")
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            lines += [f"## {method.upper()} {path} {{#{_slug(f'{method} {path}')}}}", "", f"**{op.get('summary', '')}**", ""]
            if op.get("description"):
                lines += [op["description"], ""]
            if op.get("security"):
                schemes = doc["components"]["securitySchemes"]
                for requirement in op["security"]:
                    for name in requirement:
                        scheme = schemes[name]
                        lines += [f"Authentication: `{scheme['type']}` `{scheme.get('scheme', '')}` ({name}).", ""]
            if op.get("parameters"):
                lines += ["| parameter | in | type | required | what |", "|---|---|---|---|---|"]
                for parameter in op["parameters"]:
                    schema = parameter.get("schema", {})
                    what = _described(schema)
                    lines.append(f"| `{parameter['name']}` | {parameter['in']} | {_schema_type(schema)} | "
                                 f"{'yes' if parameter.get('required') else 'no'} | {what} |")
                lines.append("")
            if op.get("requestBody"):
                lines += ["Request body: " + " ".join(_body_lines(op["requestBody"]["content"])), ""]
            lines += ["| status | what | body |", "|---|---|---|"]
            nested = []
            for status, response in op.get("responses", {}).items():
                bodies = []
                for media, body in response.get("content", {}).items():
                    schema = body.get("schema", {})
                    bodies.append(f"`{media}` {_schema_type(schema)}")
                    if schema.get("properties"):
                        nested.append((status, schema))
                lines.append(f"| {status} | {_cell(response.get('description', ''))} | {'; '.join(bodies)} |")
            lines.append("")
            for status, schema in nested:
                lines += [f"The {status} body:", "", *_properties_table(schema)]
    lines += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        lines += [f"### {name} {{#schema-{name.lower()}}}", ""]
        if "oneOf" in schema:
            lines += ["One of:", ""]
            for option in schema["oneOf"]:
                lines += _properties_table(option)
        elif schema.get("properties"):
            lines += _properties_table(schema)
        else:
            lines += [_schema_type(schema), ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the Python API

_ROLE = re.compile(r":(?:class|mod|func|meth|data|attr|exc):`~?([^`]+)`")


def _docstring(obj) -> str:
    """A docstring as Markdown: ``code`` and :role:`x` as code, indented blocks and doctests fenced."""
    doc = inspect.getdoc(obj) or ""
    doc = _ROLE.sub(r"`\1`", doc).replace("``", "`")
    out, block = [], []

    def flush():
        if block:
            while block and not block[-1].strip():
                block.pop()
            out.extend(["", "```python", *block, "```", ""])
            block.clear()

    previous_blank = True
    for line in doc.split("\n"):
        indented = line.startswith("    ") or (line.startswith(">>>") and previous_blank)
        if (indented and (previous_blank or block)) or (block and not line.strip()):
            block.append(line[4:] if line.startswith("    ") else line)
        else:
            flush()
            out.append(line)
        previous_blank = not line.strip()
    flush()
    return "\n".join(out).strip()


def _generated_dataclass_doc(obj) -> bool:
    return dataclasses.is_dataclass(obj) and (obj.__doc__ or "").startswith(f"{obj.__name__}(")


class _Annotation:
    """An annotation as written in the source (modules with ``from __future__ import annotations``
    keep them as strings), shown without quotes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _written(annotation):
    if annotation is inspect.Parameter.empty:
        return annotation
    if isinstance(annotation, str):
        return _Annotation(annotation.strip("'\""))
    return _Annotation(inspect.formatannotation(annotation))


def _signature(name: str, obj) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    parameters = [p.replace(annotation=_written(p.annotation)) for p in signature.parameters.values()]
    if parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    signature = signature.replace(parameters=parameters, return_annotation=_written(signature.return_annotation))
    text = f"{name}{signature}"
    if len(text) <= WIDTH or len(parameters) < 2:
        return text
    # One parameter a line, as a formatter would write it (the * of keyword-only ones kept).
    head = str(signature.replace(parameters=[]))[2:]  # ") -> ..." of an empty signature
    lines, star = [], False
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            lines.append("    *,")
            star = True
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            star = True
        lines.append(f"    {parameter},")
    return "\n".join([f"{name}(", *lines, ")" + head])


def _render_member(module_name: str, name: str, obj, depth: int) -> list[str]:
    qualified = f"{module_name}.{name}"
    lines = [f"{'#' * depth} `{qualified}` {{#{_slug(qualified)}}}", ""]
    if inspect.isclass(obj):
        kind = "dataclass" if dataclasses.is_dataclass(obj) else "class"
        bases = [b.__name__ for b in obj.__bases__ if b is not object]
        lines += ["```python", f"{kind} {name}" + (f"({', '.join(bases)})" if bases else ""), "```", ""]
        if not _generated_dataclass_doc(obj) and obj.__doc__:
            lines += [_docstring(obj), ""]
        if dataclasses.is_dataclass(obj):
            lines += ["| field | type | default |", "|---|---|---|"]
            for field in dataclasses.fields(obj):
                default = "" if field.default is dataclasses.MISSING else f"`{field.default!r}`"
                kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
                lines.append(f"| `{field.name}` | `{kind}` | {default} |")
            lines.append("")
        for attr, member in obj.__dict__.items():
            if attr.startswith("_"):
                continue
            function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if not inspect.isfunction(function):
                continue
            prefix = "classmethod " if isinstance(member, classmethod) else ""
            lines += [f"{'#' * (depth + 1)} `{name}.{attr}` {{#{_slug(f'{qualified}.{attr}')}}}", "",
                      "```python", prefix + _signature(attr, getattr(obj, attr)), "```", ""]
            if function.__doc__:
                lines += [_docstring(function), ""]
    elif callable(obj):
        lines += ["```python", _signature(name, obj), "```", ""]
        if obj.__doc__:
            lines += [_docstring(obj), ""]
    else:
        lines += ["```python", f"{name} = {obj!r}", "```", ""]
    return lines


def python_reference(entries: list[dict]) -> str:
    if not entries:
        raise ValueError("mkdocs.yml: extra.python_api lists no module to document")
    lines = []
    for entry in entries:
        module = importlib.import_module(entry["module"])
        members = entry.get("members") or getattr(module, "__all__", None)
        if not members:
            members = [n for n, o in vars(module).items() if not n.startswith("_")
                       and getattr(o, "__module__", None) == module.__name__ and (inspect.isfunction(o) or inspect.isclass(o))]
        lines += [f"## `{module.__name__}` {{#{_slug(module.__name__)}}}", ""]
        if module.__doc__:
            lines += [_docstring(module), ""]
        for name in members:
            if not hasattr(module, name):
                raise AttributeError(f"mkdocs.yml extra.python_api: {module.__name__} has no {name!r}")
            lines += _render_member(module.__name__, name, getattr(module, name), 3)
    return "\n".join(lines)


# --------------------------------------------------------------------------- the README

def readme_section(name: str) -> str:
    """A section of README.md without its heading (``intro``: the text before the first
    heading, without the title), its links to docs/ pages made relative to the site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    if name == "intro":
        body = text.split("\n## ", 1)[0].split("\n", 1)[1]
    else:
        if f"\n## {name}\n" not in text:
            raise ValueError(f"README.md has no section '## {name}'")
        body = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
    return re.sub(r"\]\(docs/", "](", body).strip()


# --------------------------------------------------------------------------- MkDocs events

def _generate(kind: str, argument: str | None, config) -> str:
    if kind == "cli":
        return cli_reference()
    if kind == "http":
        return http_reference()
    if kind == "python":
        return python_reference(config["extra"].get("python_api") or [])
    return readme_section((argument or "").strip().strip('"'))


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: _generate(m.group(1), m.group(2), config), markdown)


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json", content=json.dumps(openapi(), indent=2) + "\n"))
    return files
