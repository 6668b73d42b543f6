"""Parsers of what ``nvidia-smi`` and friends print, machine-readable forms first.

``nvidia-smi -q -x`` (XML) and ``--query-gpu --format=csv`` are stable across driver releases;
the screen tables are not, so only ``topo -p2p`` and ``nvlink -s`` (which have no machine form)
are read as text.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

#: Clock-event reasons that mean the hardware is slowing the GPU down (not idle or app clocks).
SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")


class ParseError(ValueError):
    """The tool answered, but not in the shape we know."""


@dataclass
class Gpu:
    index: int
    minor: int
    name: str
    bus_id: str
    persistence: str
    volatile_uncorrectable: int | None
    retired_pending: bool
    remapped_pending: bool
    slowdowns: list[str] = field(default_factory=list)
    pcie_max_gen: int | None = None
    pcie_device_max_gen: int | None = None
    pcie_width: int | None = None
    pcie_max_width: int | None = None


@dataclass
class SmiLog:
    driver_version: str
    gpus: list[Gpu]


def _text(node: ET.Element | None, path: str, default: str = "") -> str:
    found = node.find(path) if node is not None else None
    return (found.text or "").strip() if found is not None and found.text else default


def _int(value: str) -> int | None:
    match = re.match(r"^\s*(\d+)", value)
    return int(match.group(1)) if match else None


def parse_xml(text: str) -> SmiLog:
    """``nvidia-smi -q -x``. Schema v8 to v12 (older drivers name the same fields differently)."""
    try:
        # The DOCTYPE names a DTD file we never fetch; ElementTree does not resolve external entities.
        root = ET.fromstring(text.strip())
    except ET.ParseError as e:
        raise ParseError(f"nvidia-smi -q -x is not XML: {e}") from e
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi -q -x: root element is {root.tag!r}, not nvidia_smi_log")
    gpus = [_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    return SmiLog(driver_version=_text(root, "driver_version"), gpus=gpus)


def _gpu(index: int, g: ET.Element) -> Gpu:
    minor = _int(_text(g, "minor_number"))
    reasons = g.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if reasons is None:  # drivers before 535 call them throttle reasons
        reasons, prefix = g.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    slowdowns = [r for r in SLOWDOWN_REASONS if _text(reasons, prefix + r) == "Active"]
    remapped = g.find("remapped_rows")
    remapped_pending = remapped is not None and (
        _text(remapped, "remapped_row_pending") == "Yes" or _text(remapped, "remapped_row_failure") == "Yes")
    link = g.find("pci/pci_gpu_link_info")
    return Gpu(
        index=index,
        minor=index if minor is None else minor,
        name=_text(g, "product_name"),
        bus_id=_text(g, "pci/pci_bus_id") or g.get("id", ""),
        persistence=_text(g, "persistence_mode"),
        volatile_uncorrectable=_volatile_uncorrectable(g.find("ecc_errors/volatile")),
        retired_pending=_text(g, "retired_pages/pending_retirement") == "Yes",
        remapped_pending=remapped_pending,
        slowdowns=slowdowns,
        pcie_max_gen=_int(_text(link, "pcie_gen/max_link_gen")),
        pcie_device_max_gen=_int(_text(link, "pcie_gen/max_device_link_gen")),
        pcie_width=_int(_text(link, "link_widths/current_link_width")),
        pcie_max_width=_int(_text(link, "link_widths/max_link_width")),
    )


def _volatile_uncorrectable(volatile: ET.Element | None) -> int | None:
    """Sum of volatile uncorrectable counters; None when ECC is off or not reported."""
    if volatile is None:
        return None
    counts = [_int(e.text or "") for e in volatile.iter() if e.tag.endswith("uncorrectable")]
    # Schema before v11: <double_bit><total>n</total></double_bit>
    counts += [_int(_text(volatile, "double_bit/total"))]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def parse_query_csv(text: str, fields: list[str]) -> list[dict[str, str]]:
    """``--query-gpu=a,b --format=csv,noheader``: one dict per GPU."""
    rows = []
    for row in csv.reader(io.StringIO(text.strip())):
        if not row:
            continue
        if len(row) != len(fields):
            raise ParseError(f"--query-gpu answered {len(row)} columns, expected {len(fields)}: {row}")
        rows.append({f: v.strip() for f, v in zip(fields, row, strict=True)})
    return rows


def parse_p2p_matrix(text: str) -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -p2p r``: {(i, j): "OK" | "NS" | "CNS" | ...}."""
    matrix: dict[tuple[int, int], str] = {}
    header: list[int] = []
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            continue
        if all(re.fullmatch(r"GPU\d+", c) for c in cells):
            header = [int(c[3:]) for c in cells]
        elif header and re.fullmatch(r"GPU\d+", cells[0]) and len(cells) >= len(header) + 1:
            row = int(cells[0][3:])
            for col, value in zip(header, cells[1:], strict=False):
                matrix[(row, col)] = value
    return matrix


def parse_nvlink_status(text: str) -> dict[int, dict[int, bool]]:
    """``nvidia-smi nvlink -s``: {gpu index: {link: up}}."""
    links: dict[int, dict[int, bool]] = {}
    current = None
    for line in text.splitlines():
        gpu = re.match(r"^GPU (\d+):", line)
        if gpu:
            current = int(gpu.group(1))
            links[current] = {}
            continue
        link = re.match(r"^\s+Link (\d+):\s*(.*)$", line)
        if link and current is not None:
            links[current][int(link.group(1))] = "inactive" not in link.group(2).lower()
    return links


def parse_lsmod(text: str) -> set[str]:
    """``lsmod`` or /proc/modules: the loaded module names."""
    names = {line.split()[0] for line in text.splitlines() if line.strip()}
    names.discard("Module")
    return names


XID = re.compile(r"NVRM: Xid \((?P<where>[^)]*)\): (?P<code>\d+)")


def xid_events(kernel_log: str) -> list[str]:
    """Kernel log lines reporting an Xid (GPU error) since boot."""
    return [line.strip() for line in kernel_log.splitlines() if XID.search(line)]
