"""The documentation names only what exists and states the roles' own defaults: every docs/<page>.md a message of the
roles or the node checks names is a page (and a section it names in quotes is a heading of it), and every row of a
docs table that names a role default states that default's value."""

from __future__ import annotations

import ast
import re

import pytest
import yaml

from tests.conftest import ROOT

DOCS = ROOT / "docs"
# A page, optionally followed by the section it points at: docs/provisioning-nvidia.md, "Secure Boot" (in a
# comment), the roles' (gpuready_docs_dir | default('docs')) ~ '/provisioning-nvidia.md, "Secure Boot", or
# Python's docs.page("training.md", "Installing TensorFlow and Horovod").
DOC_PATH = re.compile(
    r"(?:docs/|gpuready_docs_dir \| default\('docs'\)\) ~ '/|docs\.page\([\"'])([\w-]+\.md)"
    r"(?:[\"']?, \\?[\"']([^\"'\\]+)\\?[\"'])?"
)
SOURCES = [
    p for d in ("playbooks", "validate", "provision", "workloads", "core") for p in (ROOT / d).rglob("*") if p.is_file()
]


def _named() -> list[tuple[str, str, str]]:
    found = []
    for path in SOURCES:
        if path.suffix not in (".py", ".yml", ".yaml", ".j2", ".sh"):
            continue
        for page, section in DOC_PATH.findall(path.read_text(errors="replace")):
            found.append((str(path.relative_to(ROOT)), page, section))
    return found


NAMED = _named()


def test_messages_name_doc_pages_at_all() -> None:
    assert NAMED, "no docs/<page>.md found in the roles and checks: the pattern is wrong"
    cited = {page for _, page, _ in NAMED}
    assert {"provisioning-nvidia.md", "training.md", "pytorch.md"} <= cited, cited


CHECKOUT_PATH = re.compile(r"docs/[\w-]+\.md")


def _strings(tree: ast.AST) -> list[str]:
    """The string constants of a module that are no docstring (docstrings are for the source's readers)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def _message_lines() -> list[tuple[str, str]]:
    """Text a user could read that names a docs/ page: Python's strings, templates outside their comments."""
    found = []
    for path in SOURCES:
        if path.suffix == ".py":
            texts = _strings(ast.parse(path.read_text(errors="replace")))
        elif path.suffix == ".j2":
            # Jinja's comments and YAML's (in a manifest the template renders) are for the source's readers.
            text = re.sub(r"\{#.*?#\}", "", path.read_text(errors="replace"), flags=re.DOTALL)
            texts = [re.sub(r"(?m)^\s*#.*$", "", text)]
        else:
            continue
        found += [(str(path.relative_to(ROOT)), m) for t in texts for m in CHECKOUT_PATH.findall(t)]
    return found


def test_no_message_names_a_docs_path_only_a_checkout_has() -> None:
    # In a wheel there is no docs/ beside the user: a message names the installed page (gpuready.core.docs).
    assert _message_lines() == []


@pytest.mark.parametrize(("source", "page", "section"), NAMED, ids=[f"{s}:{p}" for s, p, _ in NAMED])
def test_every_doc_page_a_message_names_exists(source: str, page: str, section: str) -> None:
    target = DOCS / page
    assert target.is_file(), f"{source} names docs/{page}, which does not exist"
    if section:
        headings = [line.lstrip("#").strip() for line in target.read_text().splitlines() if line.startswith("#")]
        assert section in headings, f"{source} names section {section!r} of docs/{page}; its headings: {headings}"


def _defaults() -> dict[str, object]:
    values: dict[str, object] = {}
    for path in (ROOT / "playbooks" / "roles").glob("*/defaults/main.yml"):
        values |= yaml.safe_load(path.read_text()) or {}
    return values


DEFAULTS = _defaults()
ROW = re.compile(r"^\| `([a-z_]+)` \| ([^|]+) \|")


def _stated() -> list[tuple[str, str, str]]:
    rows = []
    for page in sorted(DOCS.glob("*.md")):
        for line in page.read_text().splitlines():
            match = ROW.match(line)
            if match and match.group(1) in DEFAULTS:
                rows.append((page.name, match.group(1), match.group(2).strip()))
    return rows


STATED = _stated()


def _as_docs_write_it(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value == "":
        return '""'
    return str(value)


def test_docs_tables_state_role_defaults_at_all() -> None:
    assert {"nvidia_driver_manage_kernel", "nvidia_driver_oldest_supported_branch"} <= {v for _, v, _ in STATED}


@pytest.mark.parametrize(("page", "variable", "stated"), STATED, ids=[f"{p}:{v}" for p, v, _ in STATED])
def test_every_default_a_docs_table_states_is_the_roles(page: str, variable: str, stated: str) -> None:
    assert stated.strip("`") == _as_docs_write_it(DEFAULTS[variable]), f"docs/{page} says {variable} is {stated}"
