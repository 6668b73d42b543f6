"""Xid events in the kernel log, judged by NVIDIA's Xid catalog.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog"
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, the catalog of Ampere and newer GPUs,
also published as https://docs.nvidia.com/Xid-Catalog.xlsx; read 2026-11-28, see tests/fixtures/gpu/SOURCES.md).
Per Xid it gives the mnemonic, a description, the GPUs it applies to (A100, H100, B100, GB200), the
"Resolution Bucket (Immediate Action)" (what recovers the system now, automatable), the "Resolution Bucket
(Investigatory Action)" (what to look into when it recurs) and the "Xid 154 linkage" (the driver release from
which the Xid is followed by an Xid 154 that names the recovery action). :data:`CATALOG` is that table.

gpuready's classes (``node_checks.xid_fail_classes``) follow the immediate action, so NVIDIA decides what fails:

- ``application``: the node needs nothing (RESTART_APP, RESTART_VM, IGNORE, XID_154 with recovery action None).
- ``driver``: the GPU needs a reset (RESET_GPU, CHECK_UVM, UPDATE_SWFW, WORKFLOW_XID_45 alone: restart Fabric
  Manager; an Xid 154 naming a reset or a P2P drain).
- ``hardware``: a reboot, the field diagnostics or the vendor (RESTART_BM, WORKFLOW_XID_48, the NVLink workflows,
  CHECK_MECHANICALS, CONTACT_SUPPORT; an Xid 154 naming a reboot).
- ``unknown``: not in the catalog, or a row with no resolution bucket (162-172 give only text): look it up.

Xid 144-150 (WORKFLOW_NVLINK5_ERR) take the action of their sub-code's row in the catalog's "XID 144-150 Decode"
sheet (:mod:`xid_nvlink5`): RESET_GPU driver, IGNORE application, XID_154_EVAL the same GPU's Xid 154.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuready.validate.node import xid_nvlink5
from gpuready.validate.node.sheets import table

HARDWARE, DRIVER, APPLICATION, UNKNOWN = "hardware", "driver", "application", "unknown"
#: The catalog's "Applies to" columns, in its order.
GPUS = ("A100", "H100", "B100", "GB200")


@dataclass(frozen=True)
class Entry:
    mnemonic: str
    description: str
    #: The GPUs of :data:`GPUS` the catalog marks YES.
    applies: tuple[str, ...]
    immediate: str
    investigatory: str
    #: "Xid 154 linkage": the CUDA/driver release from which an Xid 154 follows this one; "" where none.
    linkage: str

    @property
    def kind(self) -> str:
        return BUCKET_CLASS.get(self.immediate, UNKNOWN)


#: NVIDIA's catalog, every row as published (xid_catalog.tsv): Xid -> its entry.
CATALOG: dict[int, Entry] = {
    int(row["Xid"]): Entry(
        row["Mnemonic"],
        row["Description"],
        tuple(gpu for gpu in GPUS if row[gpu] == "YES"),
        row["Resolution Bucket (Immediate Action)"],
        row["Resolution Bucket (Investigatory Action)"],
        row["Xid 154 linkage"],
    )
    for row in table("xid_catalog.tsv")
}

#: Rows the catalog marks "Unused" on every GPU it lists (deprecated, or Volta and older): immediate action
#: CONTACT_SUPPORT, investigatory "N/A; Unused". They are real Xids on older GPUs, so they still fail.
UNUSED = frozenset(code for code, entry in CATALOG.items() if entry.investigatory == "N/A; Unused")

#: The catalog's resolution buckets for the immediate action -> gpuready's class.
BUCKET_CLASS = {
    "RESTART_APP": APPLICATION,
    "RESTART_VM": APPLICATION,
    "IGNORE": APPLICATION,
    "RESET_GPU": DRIVER,
    "CHECK_UVM": DRIVER,
    "UPDATE_SWFW": DRIVER,
    "WORKFLOW_XID_45": DRIVER,
    "XID_154": DRIVER,
    "RESTART_BM": HARDWARE,
    "WORKFLOW_XID_48": HARDWARE,
    "WORKFLOW_NVLINK_ERR": HARDWARE,
    "WORKFLOW_NVLINK5_ERR": HARDWARE,
    "CHECK_MECHANICALS": HARDWARE,
    "CONTACT_SUPPORT": HARDWARE,
}
#: The catalog's "Fault Resolution Buckets" sheet, shortened: what each immediate action asks for.
BUCKET_ACTION = {
    "RESTART_APP": "restart the application (a GPU reset or reboot is not needed)",
    "RESTART_VM": "restart the VM that owns the GPU",
    "IGNORE": "no action",
    "RESET_GPU": "reset the GPU (nvidia-smi -r) when its processes have stopped",
    "CHECK_UVM": "reset the GPU if UVM or vGPU is in use, else no action",
    "UPDATE_SWFW": "update the GPU firmware and software to the latest versions",
    "WORKFLOW_XID_45": "alone: restart Fabric Manager; with other Xids: follow theirs",
    "XID_154": "follow the recovery action the Xid 154 names",
    "RESTART_BM": "restart the bare-metal machine",
    "WORKFLOW_XID_48": "alone: reset the GPU; with Xid 63/64: drain and reset; then run the field diagnostics "
    "(SRAM: check sram_threshold_exceeded)",
    "WORKFLOW_NVLINK_ERR": "reset the GPU or reboot; decode the Xid's registers per the catalog's NVLink workflow, "
    "reseat and run the diagnostics if it repeats",
    "WORKFLOW_NVLINK5_ERR": "decode intrInfo/errorStatus with the catalog's 'XID 144-150 Decode' sheet for the action "
    "(gpuready does; a message it cannot decode is judged here: reset the GPU or reboot, then report it)",
    "CHECK_MECHANICALS": "check the GPU's seating and every connection to it",
    "CONTACT_SUPPORT": "contact your support organisation",
}
REMEDY = {
    HARDWARE: "drain the node and follow NVIDIA's immediate action for the Xid (reboot, field diagnostics "
    "dcgmi diag -r 3, the vendor); RMA if it returns",
    DRIVER: "drain the node and reset the GPU (nvidia-smi -r) or reboot, as NVIDIA's immediate action says; "
    "if it repeats, follow the investigatory action (update the driver/firmware, nvidia-bug-report.sh)",
    UNKNOWN: "look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors)",
    APPLICATION: "restart the application; the node needs nothing unless it repeats with other programs",
}
NOT_LISTED = Entry("", "not in NVIDIA's Xid catalog", (), "", "", "")

LINE = re.compile(r"^(?:.*?\[\s*(?P<seconds>\d+\.\d+)\])?.*?NVRM: Xid \((?P<where>[^)]*)\): (?P<code>\d+)")
#: Xid 154's text, as the catalog quotes it: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot
#: Required)"; the values it lists are None, Drain P2P, Drain and Reset, GPU Reset Required, Node Reboot Required.
#: Xid 144-150's text after the code, as the catalog's WORKFLOW_NVLINK5_ERR gives it: ``<sub component>
#: <Fatal|Nonfatal> <XC> <injected> Link <n> (<intrInfo> <errorStatus> <errorDebugData[0..4]>)``.
NVLINK5_TEXT = re.compile(
    r"NVRM: Xid \([^)]*\): 1(?:4[4-9]|50),\s*(?P<name>[A-Za-z0-9_/]+)[^(]*\("
    r"(?P<intr>0x[0-9a-fA-F]+)[\s,]+(?P<status>0x[0-9a-fA-F]+)"
)
#: gpuready's class of each immediate action of the decode sheet (XID_154_EVAL alone; with an Xid 154, see
#: :func:`judged_kind`).
NVLINK5_CLASS = {"RESET_GPU": DRIVER, "IGNORE": APPLICATION, "XID_154_EVAL": APPLICATION}
RECOVERY_CHANGE = re.compile(
    r"recovery action changed from (?P<old>0x[0-9a-fA-F]+) \((?P<old_name>[^)]*)\) to "
    r"(?P<new>0x[0-9a-fA-F]+) \((?P<new_name>[^)]*)\)"
)


def recovery_class(action: str) -> str:
    """gpuready's class of a GPU recovery action (Xid 154's text or nvidia-smi's ``gpu_recovery_action``)."""
    text = action.lower()
    if text in ("", "none", "0x0"):
        return APPLICATION
    return HARDWARE if "reboot" in text else DRIVER


@dataclass(frozen=True)
class XidEvent:
    code: int
    where: str
    #: Seconds since boot as dmesg prints them; None when the line has no such stamp.
    seconds: float | None
    line: str

    @property
    def entry(self) -> Entry:
        return CATALOG.get(self.code, NOT_LISTED)

    @property
    def recovery_action(self) -> str:
        """What an Xid 154 says the GPU now needs ("" for other Xids or a text in another shape)."""
        match = RECOVERY_CHANGE.search(self.line) if self.code == 154 else None
        return match.group("new_name") if match else ""

    @property
    def nvlink5(self) -> xid_nvlink5.Decoded | None:
        """Xid 144-150: the decode sheet's row for the message's sub-code and registers (None for other Xids, or
        a message the sheet has no row for)."""
        match = NVLINK5_TEXT.search(self.line) if 144 <= self.code <= 150 else None
        if not match:
            return None
        return xid_nvlink5.decode(self.code, match["name"], int(match["intr"], 16), int(match["status"], 16))

    @property
    def kind(self) -> str:
        if self.code == 154 and self.recovery_action:
            return recovery_class(self.recovery_action)
        decoded = self.nvlink5
        if decoded:
            return NVLINK5_CLASS[decoded.immediate]
        return self.entry.kind if self.code in CATALOG else UNKNOWN

    @property
    def description(self) -> str:
        return self.entry.description

    @property
    def action(self) -> str:
        """NVIDIA's immediate and investigatory action for this event, in words."""
        if self.recovery_action:
            return f"recovery action now {self.recovery_action}"
        decoded = self.nvlink5
        if decoded:
            row = decoded.row
            said = f"{decoded.subcode} ({row.severity}): {decoded.immediate}: "
            return said + f"{xid_nvlink5.BUCKET_ACTION[decoded.immediate]}; if it recurs: {row.investigatory}"
        entry = self.entry
        if not entry.immediate:
            return "no resolution bucket in the catalog (read its trigger conditions)" if self.code in CATALOG else ""
        said = f"{entry.immediate}: {BUCKET_ACTION.get(entry.immediate, entry.immediate)}"
        return said + (f"; if it recurs: {entry.investigatory}" if entry.investigatory else "")


def events(kernel_log: str) -> list[XidEvent]:
    found = []
    for line in kernel_log.splitlines():
        match = LINE.search(line)
        if match:
            seconds = float(match.group("seconds")) if match.group("seconds") else None
            found.append(XidEvent(int(match.group("code")), match.group("where"), seconds, line.strip()))
    return found


def judged_kind(event: XidEvent, others: list[XidEvent]) -> str:
    """The class of ``event`` among the events of its window. The catalog's WORKFLOW_XID_45: an Xid 45 with
    other Xids follows theirs (it is the cleanup after them); alone it needs Fabric Manager restarted."""
    if event.code == 45 and any(e.code != 45 for e in others):
        return APPLICATION
    decoded = event.nvlink5
    if decoded and decoded.immediate == "XID_154_EVAL":
        # The decode sheet's XID_154_EVAL: the Xid 154 of the same GPU decides; without one, restart the application.
        named = [e.kind for e in others if e.code == 154 and e.where == event.where and e.recovery_action]
        return _worst(named) if named else APPLICATION
    return event.kind


def _worst(kinds: list[str]) -> str:
    order = (HARDWARE, DRIVER, UNKNOWN, APPLICATION)
    return min(kinds, key=order.index)


def recent(found: list[XidEvent], uptime: float | None, window_hours: float) -> list[XidEvent]:
    """The events within the window before now; an event whose age cannot be told counts as recent."""
    if uptime is None or window_hours <= 0:
        return found
    oldest = uptime - window_hours * 3600
    return [e for e in found if e.seconds is None or e.seconds >= oldest]


def parse_uptime(text: str) -> float | None:
    """``/proc/uptime``: seconds since boot (the clock dmesg stamps lines with)."""
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None
