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


def _row(mnemonic: str, description: str, applies: str, immediate: str, investigatory: str, linkage: str = "") -> Entry:
    return Entry(
        mnemonic,
        description,
        tuple(g for g, yes in zip(GPUS, applies, strict=True) if yes == "Y"),
        immediate,
        investigatory,
        linkage,
    )


R565, R570, R575 = "CUDA 12.7; GPU driver R565", "CUDA 12.7; GPU driver R570", "CUDA 12.9; GPU driver R575"
INTRODUCED = "yes; support with Xid introduction"
_CE = "RESTART_APP", "CONTACT_SUPPORT"

#: NVIDIA's catalog rows with a use on Ampere and newer: Xid -> its entry, as published.
CATALOG: dict[int, Entry] = {
    8: _row("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "YYYY", *_CE),
    11: _row(
        "ROBUST_CHANNEL_GR_ERROR_MISSING_HW",
        "Invalid or corrupted push buffer stream",
        "YYYY",
        "RESTART_APP",
        "CHECK_APP/CUDA",
    ),
    13: _row(
        "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        "Graphics Engine Exception",
        "YYYY",
        "RESTART_APP",
        "WORKFLOW_XID_13",
    ),
    14: _row("ROBUST_CHANNEL_FAKE_ERROR", "Unused", "YYYY", "IGNORE", "CONTACT_SUPPORT"),
    25: _row(
        "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY",
        "Invalid or illegal push buffer stream",
        "YYYY",
        "RESTART_APP",
        "CHECK_APP/CUDA",
    ),
    31: _row(
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "YYYY", "RESTART_APP", "WORKFLOW_XID_31"
    ),
    32: _row(
        "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "YYYY", "RESTART_APP", "CHECK_APP/CUDA"
    ),
    37: _row(
        "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "YYYY", "IGNORE", "CHECK_APP/CUDA"
    ),
    38: _row("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "YYYY", "IGNORE", "CONTACT_SUPPORT"),
    39: _row("ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "YYYY", *_CE),
    40: _row("ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "YYYY", *_CE),
    41: _row("ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "YYYY", *_CE),
    43: _row("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "YYYY", "IGNORE", "CONTACT_SUPPORT"),
    44: _row(
        "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW",
        "Graphics Engine fault during context switch",
        "YYYY",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    45: _row(
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        "Preemptive cleanup, due to previous errors",
        "YYYY",
        "WORKFLOW_XID_45",
        "Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)",
    ),
    46: _row("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "YYYY", "RESET_GPU", "CONTACT_SUPPORT"),
    48: _row("ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "YYYY", "WORKFLOW_XID_48", "WORKFLOW_XID_48", R565),
    54: _row(
        "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
        "Auxiliary power is not connected to the GPU board",
        "YYYN",
        "CHECK_MECHANICALS",
        "CONTACT_SUPPORT",
    ),
    60: _row("ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "YYYY", "RESTART_APP", "INVESTIGATE_SW"),
    62: _row(
        "PMU_HALT_ERROR", "Internal micro-controller halt (newer drivers)", "YYYY", "RESET_GPU", "CONTACT_SUPPORT", R565
    ),
    63: _row("INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "YYYY", "IGNORE", "IGNORE", R565),
    64: _row(
        "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "YYYY", "RESET_GPU", "CONTACT_SUPPORT", R565
    ),
    66: _row(
        "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "YYYY", "IGNORE", "INVESTIGATE_SW"
    ),
    67: _row(
        "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "YYYY", "IGNORE", "CONTACT_SUPPORT"
    ),
    68: _row("ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "YYYY", *_CE),
    69: _row("ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "YYYY", "RESTART_APP", "CHECK_APP/CUDA"),
    70: _row("ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "YYYY", *_CE),
    71: _row("ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "YYYY", *_CE),
    72: _row("ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "YYYY", *_CE),
    74: _row("NVLINK_ERROR", "NVLINK Error", "YYNN", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT", R565),
    75: _row("ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "YYYY", *_CE),
    76: _row("ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "YYYY", *_CE),
    77: _row("ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "YYYY", *_CE),
    78: _row("VGPU_START_ERROR", "vGPU Start Error", "YYYY", "UPDATE_SWFW", "UPDATE_SWFW"),
    79: _row(
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "GPU has fallen off the bus",
        "YYYY",
        "RESTART_BM",
        "CONTACT_SUPPORT",
        R565,
    ),
    80: _row("PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "YYNN", "RESTART_APP", "CHECK_APP/CUDA"),
    82: _row("ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "YYYY", *_CE),
    83: _row("ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "YYYY", *_CE),
    84: _row("ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "YYYY", *_CE),
    85: _row("ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "YYYY", *_CE),
    86: _row("ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "YYYY", *_CE),
    88: _row("ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "YYYY", *_CE),
    89: _row("ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "YYYY", *_CE),
    92: _row("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "YYYY", "IGNORE", "CONTACT_SUPPORT"),
    93: _row(
        "INFOROM_ERASE_LIMIT_EXCEEDED",
        "Non-fatal violation of provisioned InfoROM wear limit",
        "YNNN",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    94: _row(
        "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "YYYY", "RESTART_APP", "IGNORE (sympathetic)", R565
    ),
    95: _row(
        "ROBUST_CHANNEL_UNCONTAINED_ERROR",
        "Uncontained memory error",
        "YYYY",
        "RESET_GPU",
        "IGNORE (sympathetic)",
        R565,
    ),
    96: _row("ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "NYYY", *_CE),
    97: _row("ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "NYYY", *_CE),
    98: _row("ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "NYYY", *_CE),
    99: _row("ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "NYYY", *_CE),
    100: _row("ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "NYYY", *_CE),
    101: _row("ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "NYYY", *_CE),
    102: _row("ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "NYYY", *_CE),
    103: _row("ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "NYYY", *_CE),
    104: _row("ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "NYYY", *_CE),
    105: _row("ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "NYYY", *_CE),
    106: _row("SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "YYYY", "IGNORE", "IGNORE"),
    107: _row("SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "YYYY", "IGNORE", "IGNORE"),
    108: _row("NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", "YYYY", "IGNORE", "XID_137_FLOW"),
    109: _row(
        "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR",
        "Context Switch Timeout Error",
        "YYYY",
        "RESET_GPU",
        "CONTACT_SUPPORT",
        R570,
    ),
    110: _row("SEC_FAULT_ERROR", "Security Fault Error", "NYYY", "RESET_GPU", "INVESTIGATE_SW", R565),
    119: _row("GSP_RPC_TIMEOUT", "GSP RPC Timeout", "YYYY", "RESET_GPU", "INVESTIGATE_SW"),
    120: _row("GSP_ERROR", "GSP Error", "YYYY", "RESET_GPU", "INVESTIGATE_SW", R565),
    121: _row("C2C_ERROR", "C2C Error", "NNNY", "IGNORE", "CONTACT_SUPPORT"),
    **{
        code: _row(f"ROBUST_CHANNEL_CE{code - 116}_ERROR", f"CE{code - 116}: Unknown Error", "NNYY", *_CE)
        for code in range(126, 136)
    },
    136: _row("ALI_TRAINING_FAIL", "Link Training Failed", "NYNN", "RESET_GPU", "INVESTIGATE_LINK_SI", R565),
    137: _row("NVLINK_PRIV_ERR", "NVLink Privilege Error", "YYYY", "IGNORE", "XID_137_FLOW"),
    139: _row("ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "NNYY", *_CE),
    140: _row("UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "YYYY", "RESET_GPU", "CONTACT_SUPPORT"),
    141: _row("ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "NYYY", "IGNORE", "CONTACT_SUPPORT"),
    142: _row("ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "NNNY", "CONTACT_SUPPORT", ""),
    143: _row("GPU_INIT_ERROR", "GPU Initialization Error", "NYYY", "RESET_GPU", "CONTACT_SUPPORT", R575),
    144: _row("NVLINK_SAW_ERROR", "NVLINK: SAW Error", "NNYY", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", R565),
    145: _row("NVLINK_RLW_ERROR", "NVLINK: RLW Error", "NNYY", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", R565),
    146: _row("NVLINK_TLW_ERROR", "NVLINK: TLW Error", "NNYY", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", R565),
    147: _row("NVLINK_TREX_ERROR", "NVLINK: TREX Error", "NNYY", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", R565),
    148: _row(
        "NVLINK_NVLPW_CTRL_ERROR",
        "NVLINK: NVLPW_CTRL Error",
        "NNYY",
        "WORKFLOW_NVLINK5_ERR",
        "WORKFLOW_NVLINK5_ERR",
        R565,
    ),
    149: _row(
        "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "NNYY", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", R565
    ),
    150: _row("NVLINK_MSE_ERROR", "NVLINK: MSE Error", "NNYY", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", R565),
    151: _row("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "NYYY", "RESTART_VM", "CONTACT_SUPPORT"),
    152: _row("ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "NNNN", "IGNORE", "CONTACT_SUPPORT"),
    153: _row("ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "NNNN", "IGNORE", "CONTACT_SUPPORT"),
    154: _row(
        "GPU_RECOVERY_ACTION_CHANGED",
        "GPU Recovery Action Changed",
        "YYYY",
        "XID_154",
        "N/A Informational only regarding another Xid",
    ),
    155: _row("NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "NNYY", "RESET_GPU", "INVESTIGATE_SW_USER", R565),
    156: _row("RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "NYYY", "RESET_GPU", "IGNORE", R565),
    157: _row("RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "NYYY", "IGNORE", "CONTACT_SUPPORT"),
    158: _row("GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "YYYY", "RESET_GPU", "CONTACT_SUPPORT", INTRODUCED),
    159: _row(
        "ROBUST_CHANNEL_CHI_NON_DATA_ERROR",
        "CHI Non-Data Error",
        "NNYY",
        "CHECK_UVM",
        "SYMPATHETIC_REPORT_SOLO",
        INTRODUCED,
    ),
    160: _row("CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "NNYY", "IGNORE", "INVESTIGATE_SW", R575),
    161: _row("CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "NNYY", "IGNORE", "INVESTIGATE_SW", R575),
    # The catalog gives these rows text instead of resolution buckets: unknown, read its trigger text.
    162: _row("PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", "NNYY", "", ""),
    163: _row("PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", "NNYY", "", ""),
    164: _row("PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", "NNYY", "", ""),
    165: _row("PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", "NNYY", "", ""),
    166: _row(
        "NVLINK_SECURE_CRYPTO_ERR",
        "CC traffic seen prior to link properly being configured for encrypted traffic",
        "NNYY",
        "",
        "",
    ),
    167: _row("PCIE_FATAL_TIMEOUT", "PCIE_FATAL_TIMEOUT", "NYYY", "", ""),
    168: _row("REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", "YYYY", "", ""),
    169: _row("SEC2_HALT_ERROR", "Internal micro-controller halt", "NYYY", "", ""),
    170: _row("NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", "NNYY", "", ""),
    171: _row(
        "UNCORRECTABLE_DRAM_ERROR",
        "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
        "YYYY",
        "",
        "",
    ),
    172: _row(
        "UNCORRECTABLE_SRAM_ERROR",
        "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
        "YYYY",
        "",
        "",
    ),
}
#: Rows the catalog marks "Unused" on every GPU it lists (deprecated, or Volta and older): immediate action
#: CONTACT_SUPPORT, investigatory "N/A; Unused". They are real Xids on older GPUs, so they still fail.
UNUSED = frozenset(
    (
        *range(1, 8),
        9,
        10,
        12,
        *range(15, 25),
        *range(26, 31),
        *range(33, 37),
        42,
        47,
        *range(49, 54),
        *range(55, 60),
        61,
        65,
        73,
        81,
        87,
        90,
        91,
        *range(111, 119),
        *range(122, 126),
        138,
    )
)
for _code in UNUSED:
    CATALOG.setdefault(_code, Entry("", "Unused", (), "CONTACT_SUPPORT", "N/A; Unused", ""))

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
