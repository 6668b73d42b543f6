"""docs/node-checks.md shows the catalogue as the code declares it."""

from __future__ import annotations

from pathlib import Path

from gpuready.validate.node import catalogue_doc

PAGE = Path(__file__).resolve().parents[3] / "docs" / "node-checks.md"


def test_docs_page_holds_the_generated_catalogue() -> None:
    text = PAGE.read_text()
    block = text[text.index(catalogue_doc.BEGIN) : text.index(catalogue_doc.END) + len(catalogue_doc.END)] + "\n"
    assert block == catalogue_doc.render(), "regenerate: python -m gpuready.validate.node.catalogue_doc"


def test_every_reference_row_is_on_the_page_with_its_source() -> None:
    from gpuready.validate.node import references

    block = catalogue_doc.render()
    for pattern, metric, ref in references.rows():
        assert ref.source, (pattern, metric)
        assert f"| {pattern} | {metric} | {ref.target:g} | {ref.lower:g} | {ref.unit} | {ref.source} |" in block
    # Azure's H100 thresholds, with the file and line they come from.
    assert "| NVIDIA H100 80GB HBM3 | nccl_allreduce_busbw | 460 | 460 | GB/s | Azure/azurehpc-health-checks " in block
    assert "conf/nd96isr_h100_v5.conf line 52" in block
