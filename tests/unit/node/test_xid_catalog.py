"""gpuready's Xid table against NVIDIA's Xid catalog as published (rows copied from the page, SOURCES.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuready.validate.node import xid

PAGE = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "xid-catalog" / "analyzing-xid-catalog-rows.txt"
#: The catalog's "Xid 154 linkage" cells: a CUDA/driver release, or "yes; support with Xid introduction".
LINKAGE = re.compile(r"^(CUDA \d+\.\d+; GPU driver R\d+|yes; support with Xid introduction)$")


def published_rows() -> dict[int, tuple[str, str, tuple[str, ...], str, str, str]]:
    """The page's rows: ``XID |``, code, mnemonic, description, four Applies-to cells, the immediate and the
    investigatory bucket, then the linkage and trigger text when present; each cell ends with `` |``."""
    cells = [line.removesuffix(" |").strip() for line in PAGE.read_text().splitlines()]
    starts = [i for i, c in enumerate(cells) if c == "XID"]
    rows = {}
    for start, end in zip(starts, [*starts[1:], len(cells)], strict=True):
        code, mnemonic, description, *rest = cells[start + 1 : end]
        applies = tuple(g for g, yes in zip(xid.GPUS, rest[:4], strict=True) if yes == "YES")
        immediate, investigatory, *tail = rest[4:]
        linkage = next((c for c in tail if LINKAGE.match(c)), "")
        rows[int(code)] = (mnemonic, description, applies, immediate, investigatory, linkage)
    return rows


def test_the_excerpt_has_every_immediate_bucket_kind() -> None:
    buckets = {row[3] for row in published_rows().values()}
    assert len(published_rows()) == 15
    assert {"RESTART_APP", "IGNORE", "RESET_GPU", "CHECK_MECHANICALS", "UPDATE_SWFW", "RESTART_VM"} <= buckets
    assert {"WORKFLOW_NVLINK5_ERR", "XID_154", "CHECK_UVM"} <= buckets


@pytest.mark.parametrize("code", sorted(published_rows()))
def test_row_as_published(code: int) -> None:
    entry = xid.CATALOG[code]
    got = (entry.mnemonic, entry.description, entry.applies, entry.immediate, entry.investigatory, entry.linkage)
    assert got == published_rows()[code]


def test_every_immediate_bucket_has_a_class_and_an_action() -> None:
    used = {e.immediate for e in xid.CATALOG.values() if e.immediate}
    assert used == set(xid.BUCKET_CLASS) == set(xid.BUCKET_ACTION)
    # Rows 162-172 carry text, not a bucket, in the catalog: they stay unknown.
    assert {c for c, e in xid.CATALOG.items() if not e.immediate} == set(range(162, 173))


def test_classes_follow_the_immediate_action() -> None:
    kinds = {code: xid.XidEvent(code, "PCI:0000:01:00", None, "").kind for code in (13, 43, 46, 48, 79, 94, 95, 999)}
    assert kinds == {
        13: "application",  # RESTART_APP
        43: "application",  # IGNORE
        46: "driver",  # RESET_GPU
        48: "hardware",  # WORKFLOW_XID_48
        79: "hardware",  # RESTART_BM
        94: "application",  # RESTART_APP: the error is contained to one application
        95: "driver",  # RESET_GPU: uncontained
        999: "unknown",
    }
