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

from gpuready.validate.node.sheets import table

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


_LINK_DOWN = "NETIR_LINK_EVT/NETIR_LINK_DOWN"

#: The "XID 144-150 Decode" sheet, row by row in its order (xid_nvlink5_decode.tsv).
ROWS: tuple[Row, ...] = tuple(
    Row(
        int(row["Xid"]),
        row["Subcode"],
        int(row["V1 intrInfo[9:0]"], 2),
        int(row["V2 intrInfo[6:0]"], 2),
        tuple(int(value, 16) for value in row["Error Status"].split(",") if value),
        row["Immediate Action"],
        row["Investigatory Action"],
        row["Severity"],
        detail=int(row["intrInfo[25:20]"], 2),
        action2=row["Action 2"],
    )
    for row in table("xid_nvlink5_decode.tsv")
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
