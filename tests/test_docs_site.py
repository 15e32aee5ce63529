"""The documentation site builds with `mkdocs build --strict` (a broken link or anchor, a page
left out of the navigation or a hook error fails it), its generated references cover what the
code has, and the README stays a page."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_LINES = 300


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's notice about MkDocs 2.0, not a build problem
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return out


def hook():
    spec = importlib.util.spec_from_file_location("qcat_docs_reference", DOCS / "hooks" / "qcat_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_pages(item)]
    return [p for value in nav.values() for p in nav_pages(value)]


@pytest.mark.slow
def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file() and (site / "reference" / "openapi.json").is_file()


def test_the_readme_is_a_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move text into docs/"


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = nav_pages(config["nav"])
    on_disk = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
    assert sorted(in_nav) == on_disk, (set(on_disk) - set(in_nav), set(in_nav) - set(on_disk))
    assert len(in_nav) == len(set(in_nav))


def every_command(parser: argparse.ArgumentParser, delegated: dict) -> list[str]:
    """Every command of the parser tree, walked through argparse's subparsers."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                sub = delegated.get(name, sub) if parser.prog == "qcat" else sub
                found.append(sub.prog)
                found += every_command(sub, delegated)
    return found


@pytest.mark.slow
def test_the_cli_reference_lists_every_command(site):
    from qcat.cli import DELEGATED

    top, delegated = hook().command_parsers()
    assert sorted(delegated) == sorted(DELEGATED)
    commands = every_command(top, delegated)
    # The tree is the real one: the delegated commands' own subcommands are in it.
    for command in ("qcat classify", "qcat serve", "qcat data ingest", "qcat train nb", "qcat train xmlq",
                    "qcat train hybrid", "qcat evaluate", "qcat golden evaluate", "qcat db upgrade",
                    "qcat judge create-session", "qcat judge app", "qcat judge export"):
        assert command in commands, command
    html = page(site, "reference/cli")
    for command in commands:
        anchor = re.sub(r"[^a-z0-9]+", "-", command.lower()).strip("-")
        assert f'id="{anchor}"' in html, f"the CLI reference has no section for {command}"
    for flag in ("--min-score", "--catalog-only", "--init-embeddings", "--differing-only", "--max-connections"):
        assert flag in html, flag


@pytest.mark.slow
def test_the_http_reference_lists_every_endpoint(site):
    from qcat.serve.config import ServeConfig
    from qcat.serve.openapi import openapi_document

    document = openapi_document(ServeConfig())
    html = page(site, "reference/http-api")
    for path, methods in document["paths"].items():
        for method in methods:
            assert f"{method.upper()} {path}" in html, (method, path)
    for schema in document["components"]["schemas"]:
        assert f'id="schema-{schema.lower()}"' in html, schema


@pytest.mark.slow
def test_the_python_reference_documents_the_listed_modules(site):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    html = page(site, "reference/python-api")
    def anchor(name: str) -> str:
        return 'id="' + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + '"'

    for entry in config["extra"]["python_api"]:
        assert anchor(entry["module"]) in html, entry["module"]
        for member in entry["members"]:
            assert anchor(f"{entry['module']}.{member}") in html, (entry["module"], member)
    assert anchor("qcat.classifier.Classifier.classify") in html


@pytest.mark.slow
def test_the_home_page_says_what_the_readme_says(site):
    html = page(site, "")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for words in ("near-zero score", "the core and the demo come to", "eBay's hybrid query classifier"):
        assert words in readme and words in html, words
