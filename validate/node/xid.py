"""Xid events in the kernel log, classified by NVIDIA's Xid catalogue.

Source: NVIDIA, "Xid Errors" (https://docs.nvidia.com/deploy/xid-errors/index.html) and its
catalogue for Ampere and newer ("Analyzing Xid Errors with the Xid Catalog",
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html: a resolution bucket per Xid,
RESTART_APP for the application's own errors, RESET_GPU / RESTART_BM / CONTACT_SUPPORT for the
GPU's), and NVIDIA's "Dynamic Page Retirement" (Xid 48, 63, 64). Three classes:

- ``hardware``: the GPU, its memory or its links failed; drain, reset, field diagnostics, RMA.
- ``driver``: the driver, GSP firmware or a micro-controller failed; reset the GPU or reboot,
  update the driver if it repeats.
- ``application``: the usual cause is the program (an illegal address, a watchdog on a kernel
  that did not stop); restart it, the node is fine.

Codes not in the table are ``unknown`` and fail like the hardware class: look them up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HARDWARE, DRIVER, APPLICATION, UNKNOWN = "hardware", "driver", "application", "unknown"

#: Xid -> (class, NVIDIA's short description).
CATALOGUE: dict[int, tuple[str, str]] = {
    13: (APPLICATION, "graphics engine exception"),
    31: (APPLICATION, "GPU memory page fault"),
    43: (APPLICATION, "GPU stopped processing"),
    45: (APPLICATION, "preemptive cleanup, due to previous errors"),
    109: (APPLICATION, "context switch timeout"),
    8: (DRIVER, "GPU stopped processing (FIFO idle timeout)"),
    32: (DRIVER, "invalid or corrupted push buffer stream"),
    38: (DRIVER, "driver firmware error"),
    56: (DRIVER, "display engine error"),
    61: (DRIVER, "internal micro-controller breakpoint/warning"),
    62: (DRIVER, "internal micro-controller halt"),
    68: (DRIVER, "video decoder (NVDEC) exception"),
    69: (DRIVER, "graphics engine class error"),
    119: (DRIVER, "GSP RPC timeout"),
    120: (DRIVER, "GSP error"),
    122: (DRIVER, "SPI PMU RPC read failure"),
    123: (DRIVER, "SPI PMU RPC write failure"),
    124: (DRIVER, "SPI PMU RPC erase failure"),
    154: (DRIVER, "GPU recovery action changed (reset or reboot required)"),
    48: (HARDWARE, "double-bit (uncorrectable) ECC error"),
    57: (HARDWARE, "error programming video memory interface"),
    58: (HARDWARE, "unstable video memory interface detected"),
    63: (HARDWARE, "ECC page retirement or row remapping recorded (reset to activate)"),
    64: (HARDWARE, "ECC page retirement or row remapper recording failure"),
    74: (HARDWARE, "NVLink error"),
    79: (HARDWARE, "GPU has fallen off the bus"),
    92: (HARDWARE, "high single-bit ECC error rate"),
    94: (HARDWARE, "contained ECC error"),
    95: (HARDWARE, "uncontained ECC error"),
    121: (HARDWARE, "C2C link corrected error"),
    140: (HARDWARE, "ECC unrecovered error"),
    143: (HARDWARE, "GPU initialization failure"),
    144: (HARDWARE, "NVLink SAW error"),
    145: (HARDWARE, "NVLink RLW error"),
    146: (HARDWARE, "NVLink TLW error"),
    147: (HARDWARE, "NVLink TREX error"),
    148: (HARDWARE, "NVLink NVLPW_CTRL error"),
    149: (HARDWARE, "NVLink NETIR error"),
    150: (HARDWARE, "NVLink MSE error"),
}

REMEDY = {
    HARDWARE: "drain the node, reset the GPU (nvidia-smi -r) or reboot, run the field diagnostics "
    "(dcgmi diag -r 3); RMA if it returns",
    DRIVER: "reset the GPU or reboot; if it repeats, update the driver/firmware and send NVIDIA a bug report "
    "(nvidia-bug-report.sh)",
    UNKNOWN: "look the code up in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors)",
    APPLICATION: "restart the application; the node needs nothing unless it repeats with other programs",
}

LINE = re.compile(r"^(?:.*?\[\s*(?P<seconds>\d+\.\d+)\])?.*?NVRM: Xid \((?P<where>[^)]*)\): (?P<code>\d+)")


@dataclass(frozen=True)
class XidEvent:
    code: int
    where: str
    #: Seconds since boot as dmesg prints them; None when the line has no such stamp.
    seconds: float | None
    line: str

    @property
    def kind(self) -> str:
        return CATALOGUE.get(self.code, (UNKNOWN, ""))[0]

    @property
    def description(self) -> str:
        return CATALOGUE.get(self.code, (UNKNOWN, "not in the catalogue table"))[1]


def events(kernel_log: str) -> list[XidEvent]:
    found = []
    for line in kernel_log.splitlines():
        match = LINE.search(line)
        if match:
            seconds = float(match.group("seconds")) if match.group("seconds") else None
            found.append(XidEvent(int(match.group("code")), match.group("where"), seconds, line.strip()))
    return found


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
