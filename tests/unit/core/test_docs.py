"""The README stays a front page; the manual is the MkDocs site under docs/, which builds with --strict."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT, require

BIN = Path(sys.executable).parent


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def test_readme_is_at_most_150_lines_and_keeps_the_two_quick_start_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "make demo" in text and "make test" in text


def test_every_page_in_the_nav_exists_and_the_readme_links_resolve() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    pages = _nav_pages(config["nav"])
    assert pages and all((ROOT / "docs" / p).is_file() for p in pages), pages
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", (ROOT / "README.md").read_text()):
        assert (ROOT / target).is_file(), target


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = BIN / "mkdocs"
    require(mkdocs.is_file(), "mkdocs is not installed (the dev extra installs it)")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "vsphere" / "index.html").is_file()
    assert (tmp_path / "site" / "troubleshooting" / "index.html").is_file()
