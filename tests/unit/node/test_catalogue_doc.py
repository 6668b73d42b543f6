"""docs/node-checks.md shows the catalogue as the code declares it."""

from __future__ import annotations

from pathlib import Path

from gpuready.validate.node import catalogue_doc

PAGE = Path(__file__).resolve().parents[3] / "docs" / "node-checks.md"


def test_docs_page_holds_the_generated_catalogue() -> None:
    text = PAGE.read_text()
    block = text[text.index(catalogue_doc.BEGIN) : text.index(catalogue_doc.END) + len(catalogue_doc.END)] + "\n"
    assert block == catalogue_doc.render(), "regenerate: python -m gpuready.validate.node.catalogue_doc"
