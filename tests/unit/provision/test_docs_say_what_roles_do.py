"""The documentation names only what exists and states the roles' own defaults: every docs/<page>.md a message of the
roles or the node checks names is a page (and a section it names in quotes is a heading of it), and every row of a
docs table that names a role default states that default's value."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import ROOT

DOCS = ROOT / "docs"
# A page, optionally followed by the section it points at: docs/provisioning-nvidia.md, "Secure Boot".
DOC_PATH = re.compile(r"docs/([\w-]+\.md)(?:, \\?\"([^\"\\]+)\\?\")?")
SOURCES = [p for d in ("playbooks", "validate", "provision") for p in (ROOT / d).rglob("*") if p.is_file()]


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
