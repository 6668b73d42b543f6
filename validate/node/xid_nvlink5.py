"""Xid 144-150 (NVLink 5) decoded by NVIDIA's "XID 144-150 Decode" sheet.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog"
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, https://docs.nvidia.com/Xid-Catalog.xlsx,
sheet "XID 144-150 Decode" and the WORKFLOW_NVLINK5_ERR row of "Fault Resolution Buckets"; read 2026-11-28, see
tests/fixtures/gpu/SOURCES.md). The catalog gives Xid 144-150 no fixed action (WORKFLOW_NVLINK5_ERR): the message

    Xid (PCI:0000:BB:DF): <Xid>, <sub component> <Fatal|Nonfatal> <XC> <injected> Link <n>
        (<intrInfo> <errorStatus> <errorDebugData[0..4]>)

is decoded by its first two registers. The sheet's masks, read from its cells (most significant bit first, "-" = any):

- intrInfo[25:20]: a detail field, 0 except on NETIR_LINK_EVT/NETIR_LINK_DOWN, where it names why the link went down.
- V1 messages (drivers before R575): intrInfo[9:0] is the unit (bits 4:0) and the sub-code (IntrInfo[9:5]).
- V2 messages (R575 and later): intrInfo[6:0] is the sub-code.
- RLW_RXPIPE errors are "promotable": with intrInfo bit 10 (V1) or bit 7 (V2) set, the sheet's "Action 2" applies.
- errorStatus selects the row; the NETIR_INT and NETIR_LINK_DOWN rows leave it blank (any value).

Where the sub component is named differently in V1 and V2, the sheet writes "V1/V2" (NETIR_LINK_EVT/NETIR_LINK_DOWN);
the name in the message tells the version, and a name both share is tried as both.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Immediate actions of the decode sheet, worst first (the order a message matching several rows is judged by).
ACTIONS = ("RESET_GPU", "XID_154_EVAL", "IGNORE")


@dataclass(frozen=True)
class Row:
    xid: int
    #: The sheet's "Subcode" cell: one name, or "V1 name/V2 name".
    subcode: str
    v1: int
    v2: int
    #: Error Status values the row applies to; empty where the sheet leaves the cell blank (any).
    status: tuple[int, ...]
    immediate: str
    investigatory: str
    severity: str
    #: intrInfo[25:20] as the row's mask gives it.
    detail: int = 0
    #: "Action 2": the action of a promoted error (intrInfo bit 10 in V1, bit 7 in V2); "" where none.
    action2: str = ""

    def names(self, version: int) -> str:
        v1, _, v2 = self.subcode.partition("/")
        return v1 if version == 1 or not v2 else v2


def _rows(xid: int, subcode: str, v1: str, v2: str, *cells: tuple[int, str, str, str]) -> list[Row]:
    """One row per (error status, immediate action, investigatory action, severity) of a sub-code; the masks as the
    sheet writes their decoded bits (V1 intrInfo[9:0], V2 intrInfo[6:0])."""
    return [Row(xid, subcode, int(v1, 2), int(v2, 2), (s,), i, inv, sev) for s, i, inv, sev in cells]


_NF, _F = "Non-fatal", "Fatal"
_CS = "CONTACT_SUPPORT"
# The four rows every TLW sub-code has.
_TLW = (
    (0x1, "IGNORE", "IGNORE", _NF),
    (0x2, "IGNORE", _CS, _NF),
    (0x4, "RESET_GPU", _CS, _F),
    (0x80000000, "IGNORE", _CS, _NF),
)
_LINK_DOWN = "NETIR_LINK_EVT/NETIR_LINK_DOWN"
_PEER = "INVESTIGATE_PEER_DEVICE"
_SI = "INVESTIGATE_LINK_SI"
_CABLES = "INVESTIGATE_LINK_SI_AND_CABLES"

#: The "XID 144-150 Decode" sheet, row by row in its order.
ROWS: tuple[Row, ...] = (
    *_rows(
        144,
        "SAW_MVB",
        "0000100001",
        "0000001",
        (0x1, "IGNORE", _CS, _NF),
        (0x2, "RESET_GPU", _CS, _F),
        (0x4, "IGNORE", "IGNORE", _NF),
        (0x8, "IGNORE", _CS, _NF),
        (0x10, "RESET_GPU", _CS, _F),
        (0x20, "IGNORE", "IGNORE", _NF),
    ),
    *_rows(145, "RLW_CTRL", "0001100010", "0000011", (0x80000000, "IGNORE", _CS, _NF)),
    *_rows(
        145,
        "RLW_REMAP",
        "0010000010",
        "0000100",
        (0x1, "XID_154_EVAL", _CS, _NF),
        (0x2, "XID_154_EVAL", _CS, _NF),
        (0x4, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", _NF),
        (0x8, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", _NF),
        (0x10, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", _NF),
        (0x20, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", _NF),
        (0x40, "RESET_GPU", _CS, _F),
        (0x80, "RESET_GPU", _CS, _F),
        (0x100, "IGNORE", "IGNORE", _NF),
        (0x200, "IGNORE", "IGNORE", _NF),
        (0x80000000, "IGNORE", _CS, _NF),
    ),
    *_rows(
        145,
        "RLW_RSPCOL",
        "0010100010",
        "0000101",
        (0x1, "IGNORE", "IGNORE", _NF),
        (0x2, "RESET_GPU", _CS, _F),
        (0x80000000, "IGNORE", _CS, _NF),
    ),
    *(
        Row(145, "RLW_RXPIPE", 0b0011000010, 0b0000110, (s,), "IGNORE", _CS, "Non-fatal*", action2="RESET_GPU")
        for s in (0x1, 0x2, 0x4)
    ),
    *_rows(
        145,
        "RLW_RXPIPE",
        "0011000010",
        "0000110",
        (0x8, "IGNORE", _CS, _NF),
        (0x80000000, "IGNORE", _CS, _NF),
    ),
    *_rows(
        145,
        "RLW_SRC_TRACK",
        "0011100010",
        "0000111",
        (0x1, "RESET_GPU", _CS, _F),
        (0x2, "IGNORE", "IGNORE", _NF),
        (0x4, "XID_154_EVAL", "IGNORE", _NF),
        (0x8, "XID_154_EVAL", "IGNORE", _NF),
        (0x10, "RESET_GPU", _CS, _F),
        (0x20, "RESET_GPU", _CS, _F),
        (0x80000000, "IGNORE", _CS, _NF),
    ),
    *_rows(
        145,
        "RLW_TAGSTATE",
        "0100000010",
        "0001000",
        (0x1, "IGNORE", "IGNORE", _NF),
        (0x2, "RESET_GPU", _CS, _F),
        (0x10000, "IGNORE", "IGNORE", _NF),
        (0x20000, "RESET_GPU", _CS, _F),
        (0x100000, "RESET_GPU", _CS, _F),
        (0x80000000, "IGNORE", _CS, _NF),
    ),
    *_rows(146, "TLW_CTRL", "0100100011", "0001001", *_TLW),
    *_rows(146, "TLW_RX/TLW_RX_PIPE0", "0101000011", "0001010", *_TLW),
    *_rows(146, "TLW_RX/TLW_RX_PIPE1", "0101000011", "0001011", *_TLW),
    *_rows(146, "TLW_TX/TLW_TX_PIPE0", "0101100011", "0001100", *_TLW),
    *_rows(146, "TLW_TX/TLW_TX_PIPE1", "0101100011", "0001101", *_TLW),
    *_rows(147, "TREX", "0110000100", "0001110", (0x1, "IGNORE", _CS, _NF), (0x80000000, "IGNORE", _CS, _NF)),
    *_rows(148, "NVLPW_CTRL/NVLPW", "0000000101", "0001111", (0x80000000, "IGNORE", _CS, _NF)),
    Row(149, "NETIR/NETIR_INT", 0b0000000110, 0b0011000, (), "RESET_GPU", "SYMPATHETIC_REPORT_SOLO", "Link Fatal"),
    *(
        Row(149, _LINK_DOWN, 0b0111000110, 0b0010001, (), action, inv, sev, detail=int(bits, 2))
        for bits, action, inv, sev in (
            ("000000", "RESET_GPU", "SYMPATHETIC_REPORT_SOLO", "Link Fatal"),
            ("000001", "RESET_GPU", "REPORT_ISSUE (if seen >1 per day)", "Link Fatal"),
            ("000010", "RESET_GPU", _SI, "Link Fatal"),
            ("000100", "RESET_GPU", _SI, "Link Fatal"),
            ("001010", "RESET_GPU", _SI, "Link Fatal"),
            ("001111", "RESET_GPU", "INVESTIGATE_SW_USER", "Link Fatal"),
            ("010000", "RESET_GPU", "INVESTIGATE_SW_USER_LINK_SI", "Link Fatal"),
            ("010001", "RESET_GPU", "INVESTIGATE_SW_USER", "Link Fatal"),
            ("010010", "RESET_GPU", "INVESTIGATE_SW_USER_LINK_SI", "Link Fatal"),
            ("010101", "RESET_GPU", _PEER, "Link Fatal"),
            ("010110", "RESET_GPU", "INVESTIGATE_SW_USER", "Link Fatal"),
            ("100000", "RESET_GPU", _PEER, "Link Fatal"),
            ("100001", "RESET_GPU", _PEER, "Link Fatal"),
            ("100010", "RESET_GPU", _PEER, "Link Fatal"),
            ("100011", "RESET_GPU", _PEER, "Link Fatal"),
            ("100100", "RESET_GPU", _PEER, "Link Fatal"),
            ("100101", "RESET_GPU", _PEER, "Link Fatal"),
            ("100110", "IGNORE", "INVESTIGATE_SW/USER", "Link Fatal"),
            ("101000", "IGNORE", "INVESTIGATE_HOST", "Fatal"),
            ("101010", "RESET_GPU", _CABLES, "Link Fatal?"),
            ("101011", "RESET_GPU", _CABLES, "Link Fatal?"),
        )
    ),
    *_rows(
        149,
        "NETIR_BER_EVENT",
        "1000100110",
        "0010011",
        *((s, "IGNORE", _CABLES, _NF) for s in (0x0, 0x1, 0x2, 0x3)),
    ),
    *_rows(
        149,
        "NETIR_MFDE_EVENT",
        "1001000110",
        "0010100",
        (0x1, "RESET_GPU", _CS, "Fatal**"),
        (0x3, "IGNORE", "IGNORE", _NF),
        (0x4, "RESET_GPU", _CS, "Fatal**"),
        (0x5, "RESET_GPU", _CS, "Fatal**"),
        (0x7, "RESET_GPU", _CS, "Fatal**"),
    ),
    Row(150, "MSE Degraded", 0, 0, (0x0, 0xFFFFFFFF), "RESET_GPU", _CS, _F),
    Row(150, "MSE_WATCHDOG", 0, 0, (0x0,), "RESET_GPU", _CS, _F),
)

#: The decode sheet's investigatory and action buckets that the catalog's "Fault Resolution Buckets" sheet words.
BUCKET_ACTION = {
    "RESET_GPU": "reset the GPU (nvidia-smi -r) when its processes have stopped",
    "IGNORE": "no action",
    "XID_154_EVAL": "if an Xid 154 is seen along with this error, take its action; if none, restart the application",
}


@dataclass(frozen=True)
class Decoded:
    row: Row
    #: 1: V1 (drivers before R575), 2: V2 (R575 and later).
    version: int
    intr_info: int
    error_status: int

    @property
    def promoted(self) -> bool:
        return bool(self.row.action2) and bool(self.intr_info & (1 << (10 if self.version == 1 else 7)))

    @property
    def immediate(self) -> str:
        return self.row.action2 if self.promoted else self.row.immediate

    @property
    def subcode(self) -> str:
        detail = f" {self.row.detail:06b}" if self.row.subcode == _LINK_DOWN else ""
        return f"{self.row.subcode}{detail}"


def _matches(row: Row, version: int, intr: int, status: int) -> bool:
    low = intr & (0x3FF if version == 1 else 0x7F)
    return (
        low == (row.v1 if version == 1 else row.v2)
        and (intr >> 20) & 0x3F == row.detail
        and (not row.status or status in row.status)
    )


def decode(xid: int, name: str, intr_info: int, error_status: int) -> Decoded | None:
    """The sheet's row for a message; None where no row matches (the registers are not in the sheet).

    Where the message matches rows of both versions with different actions (a name both versions share and
    registers that fit both masks), the worse action is taken: :data:`ACTIONS` order."""
    rows = [r for r in ROWS if r.xid == xid]
    named = {v for r in rows for v in (1, 2) if r.names(v) == name}
    found = [
        Decoded(r, v, intr_info, error_status)
        for r in rows
        for v in sorted(named or {1, 2})
        if (not named or r.names(v) == name) and _matches(r, v, intr_info, error_status)
    ]
    rank = {a: i for i, a in enumerate(ACTIONS)}
    return min(found, key=lambda d: rank.get(d.immediate, len(ACTIONS)), default=None)
