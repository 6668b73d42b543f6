"""gpuready's Xid table against NVIDIA's Xid catalog as published (rows copied from the page, SOURCES.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuready.validate.node import xid, xid_nvlink5

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


# ------------------------------------------------------------- the "XID 144-150 Decode" sheet
DECODE_PAGE = PAGE.parent / "xid-144-150-decode-rows.txt"
#: A mask cell: "—" runs around intrInfo[25:20], then "-" (the promotion bit is any) or that bit, then the sub-code.
MASK = re.compile(r"^—+(?P<detail>[01]{6})—+(?P<low>-?[01]+)$")
XID_CELL = re.compile(r"^1(?:4[4-9]|50)$")


def published_decode_rows() -> list[dict[str, object]]:
    """The excerpt's rows: Xid, sub-code, the V1 and V2 masks, the error status when the row has one, the immediate
    action, the action-2 masks and action when the row has them, then investigatory action and severity."""
    cells = [c.removesuffix(" |").strip() for c in DECODE_PAGE.read_text().splitlines()]
    cells = [c for c in cells if c.strip("|")]
    starts = [i for i, c in enumerate(cells) if XID_CELL.match(c)]
    rows = []
    for start, end in zip(starts, [*starts[1:], len(cells)], strict=True):
        xid_cell, subcode, v1, v2, *rest = cells[start:end]
        status = rest.pop(0).split("/") if rest[0].startswith("0x") else []
        immediate = rest.pop(0)
        action2 = ""
        if MASK.match(rest[0]):
            rest = rest[2:]
            action2 = rest.pop(0)
        v1m, v2m = MASK.match(v1), MASK.match(v2)
        assert v1m and v2m, (v1, v2)
        rows.append(
            {
                "xid": int(xid_cell),
                "subcode": subcode,
                "v1": int(v1m["low"].lstrip("-")[-10:], 2),
                "v2": int(v2m["low"].lstrip("-")[-7:], 2),
                "detail": int(v1m["detail"], 2),
                "status": tuple(int(s, 16) for s in status),
                "immediate": immediate,
                "action2": action2,
                "investigatory": rest[0],
                "severity": rest[1],
            }
        )
    return rows


def test_the_decode_excerpt_covers_every_action_and_version_form() -> None:
    rows = published_decode_rows()
    assert len(rows) == 16
    assert {r["immediate"] for r in rows} == set(xid_nvlink5.ACTIONS)
    assert {r["xid"] for r in rows} == {144, 145, 146, 148, 149, 150}
    assert any(r["action2"] for r in rows) and any(not r["status"] for r in rows)


@pytest.mark.parametrize("published", published_decode_rows(), ids=lambda r: f"{r['xid']}-{r['subcode']}")
def test_decode_row_as_published(published: dict[str, object]) -> None:
    status = published["status"]
    [row] = [
        r
        for r in xid_nvlink5.ROWS
        if (r.xid, r.subcode, r.detail) == (published["xid"], published["subcode"], published["detail"])
        and r.status == status
    ]
    got = {
        "xid": row.xid,
        "subcode": row.subcode,
        "v1": row.v1,
        "v2": row.v2,
        "detail": row.detail,
        "status": row.status,
        "immediate": row.immediate,
        "action2": row.action2,
        "investigatory": row.investigatory,
        "severity": row.severity,
    }
    assert got == published


def test_rows_that_share_registers_are_told_apart_by_name_or_agree() -> None:
    # V1 masks do not tell TLW_RX_PIPE0 from PIPE1 (nor TX), and both MSE rows read 0: the sub component's name in the
    # message does (V2's), or the rows give the same action.
    for version in (1, 2):
        groups: dict[tuple[int, int, int, int | None], list[xid_nvlink5.Row]] = {}
        for r in xid_nvlink5.ROWS:
            for s in r.status or (None,):
                groups.setdefault((r.xid, r.v1 if version == 1 else r.v2, r.detail, s), []).append(r)
        for rows in groups.values():
            names = {r.names(version) for r in rows}
            assert len(names) == len(rows) or len({r.immediate for r in rows}) == 1, rows
    assert len(xid_nvlink5.ROWS) == 95  # the sheet's row count (a generator of the xlsx in the code index counts 95)


@pytest.mark.parametrize(
    ("line", "subcode", "action"),
    [
        # V1 messages (before R575) from the recordings in tests/fixtures/gpu/kernel-log.
        (
            "149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
        ),
        ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001", "RLW_RXPIPE", "IGNORE"),
        ("149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000", "NETIR/NETIR_INT", "RESET_GPU"),
        # The same RLW_RXPIPE error status with the promotion bit (intrInfo bit 10) set: the sheet's Action 2.
        ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a4c2 0x00000001 0x00000001", "RLW_RXPIPE", "RESET_GPU"),
        # V2 (R575 and later): the sub-code in intrInfo[6:0], named as V2 names it.
        (
            "149, NETIR_LINK_DOWN Fatal XC0 i0 Link 01 (0x02100011 0x00000000",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
        ),
        ("145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000001", "RLW_REMAP", "XID_154_EVAL"),
    ],
)
def test_messages_decode_to_their_row(line: str, subcode: str, action: str) -> None:
    code, _, rest = line.partition(", ")
    event = xid.XidEvent(int(code), "PCI:0000:01:00", None, f"NVRM: Xid (PCI:0000:01:00): {code}, {rest}")
    decoded = event.nvlink5
    assert decoded is not None and decoded.row.subcode == subcode and decoded.immediate == action


def test_registers_the_sheet_does_not_list_stay_the_catalogs_workflow() -> None:
    # NETIR_LINK_DOWN's detail field 000011 has no row: the catalog's WORKFLOW_NVLINK5_ERR (hardware) stands.
    line = "NVRM: Xid (PCI:0000:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 01 (0x003005c6 0x00000000)"
    event = xid.XidEvent(149, "PCI:0000:01:00", None, line)
    assert event.nvlink5 is None and event.kind == "hardware"
    assert event.action.startswith("WORKFLOW_NVLINK5_ERR: decode intrInfo/errorStatus")
