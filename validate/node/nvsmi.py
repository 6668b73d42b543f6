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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

#: Clock-event reasons that mean the hardware is slowing the GPU down: a node fault (cooling, power).
SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")
#: Reasons that are the GPU doing what it was told or saving power: reported, never a fault.
BENIGN_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "sync_boost", "display_clocks_setting")
#: Values nvidia-smi prints where a field does not apply or is not read on this GPU/driver.
NOT_AVAILABLE = ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error")
VERSION = re.compile(r"\d{3,}\.\d+(?:\.\d+)?")
# Compiled once: the parsers below run over every host's output, tens of thousands of lines at 64 hosts.
_LEADING_INT = re.compile(r"\s*(\d+)")
_GPU_HEADER = re.compile(r"GPU (\d+):")
_LINK_LINE = re.compile(r"\s+Link (\d+):\s*(.*)")
_COUNTER = re.compile(r"([^:]+):\s*(\d+)\s*")
#: First line of the PCI listing read from /sys/bus/pci where lspci is missing.
SYSFS_MARK = "== sysfs"
# Driver 580's `nvidia-smi topo` underlines its header with terminal escapes even into a pipe or file
# (recorded on an H100 with 580.159.04: tests/fixtures/gpu/recorded), so the text views are read without them.
_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    """nvidia-smi's text output without terminal colour/underline escapes."""
    return _ESCAPE.sub("", text)


class ParseError(ValueError):
    """The tool answered, but not in the shape we know."""


@dataclass(frozen=True)
class Process:
    """One ``<process_info>`` of ``nvidia-smi -q -x``."""

    pid: str
    type: str
    name: str
    used_memory: str

    def describe(self) -> str:
        return f"pid {self.pid} {self.name or '(name not reported)'} ({self.used_memory or 'memory not reported'})"


@dataclass
class Gpu:
    index: int
    minor: int
    name: str
    bus_id: str
    persistence: str
    #: Volatile (since the last driver load) uncorrectable counters by name; empty when ECC is off or N/A.
    volatile_uncorrectable: dict[str, int] = field(default_factory=dict)
    aggregate_uncorrectable: dict[str, int] = field(default_factory=dict)
    #: Volatile corrected (single-bit) counters by name; empty when ECC is off or N/A.
    volatile_correctable: dict[str, int] = field(default_factory=dict)
    ecc_mode: str = ""
    sram_threshold_exceeded: bool = False
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool = False
    remapped_pending: bool = False
    remapped_failure: bool = False
    #: Blackwell: an HBM channel or TPC repair waits for a reset.
    repair_pending: list[str] = field(default_factory=list)
    #: Schema v13 ``ecc_errors/unrepairable_memory`` Yes: NVML's unrepairable-memory flag
    #: (nvmlDeviceGetUnrepairableMemoryFlag_v1, NVML API reference R590): a memory fault the GPU's
    #: repair (row remapping, channel repair) cannot fix. No and N/A (not reported) are not set.
    unrepairable_memory: bool = False
    slowdowns: list[str] = field(default_factory=list)
    benign_reasons: list[str] = field(default_factory=list)
    pcie_gen: int | None = None
    pcie_max_gen: int | None = None
    pcie_device_max_gen: int | None = None
    pcie_host_max_gen: int | None = None
    pcie_width: int | None = None
    pcie_max_width: int | None = None
    pcie_replays: int | None = None
    mig_current: str = ""
    mig_pending: str = ""
    virtualization: str = ""
    architecture: str = ""
    fabric_state: str = ""
    fabric_status: str = ""
    #: GB200/GB300 fabric identity (schema v13 ``fabric/cliqueId``, ``fabric/clusterUuid``): every GPU of one NVLink
    #: domain (rack) reports the same cluster UUID and clique id once Fabric Manager has registered it.
    fabric_clique: str = ""
    fabric_cluster: str = ""
    #: ``fabric/health/summary`` and ``fabric/health/bandwidth`` (Healthy/Full on a whole fabric).
    fabric_health: str = ""
    fabric_bandwidth: str = ""
    #: ``gpu_recovery_action`` (drivers 550 and later; NVML's nvmlDeviceGetGpuRecoveryAction): what the GPU needs
    #: before new work, None when nothing. "" where the schema has no such field.
    recovery_action: str = ""
    #: ``gpu_reset_status/reset_required`` Yes: the driver says "GPU requires reset" (deprecated text in 570+).
    reset_required: bool = False
    #: ``utilization/gpu_util`` in percent; None where not reported.
    utilization: int | None = None
    #: What runs on the GPU now (``<processes>``): the performance checks never judge a busy GPU.
    processes: list[Process] = field(default_factory=list)

    @property
    def compute_processes(self) -> list[Process]:
        """Processes that compute on the GPU (type C, C+G, M); a display server alone (type G) is not a load."""
        return [p for p in self.processes if p.type != "G"]

    @property
    def mig_enabled(self) -> bool:
        return self.mig_current == "Enabled"


@dataclass
class SmiLog:
    driver_version: str
    gpus: list[Gpu]
    schema: str = ""


def _text(node: ET.Element | None, path: str, default: str = "") -> str:
    found = node.find(path) if node is not None else None
    return (found.text or "").strip() if found is not None and found.text else default


def _int(value: str) -> int | None:
    match = _LEADING_INT.match(value)
    return int(match.group(1)) if match else None


def _available(value: str) -> str:
    """The value, or "" where nvidia-smi says the field is not available on this GPU or driver."""
    return "" if value in NOT_AVAILABLE else value


def driver_version(raw: str) -> str:
    """The version number in what nvidia-smi printed, whatever text a driver adds around it."""
    match = VERSION.search(raw or "")
    return match.group(0) if match else ""


def parse_xml(text: str) -> SmiLog:
    """``nvidia-smi -q -x``, schema v8 to v13: the same facts under each schema's names."""
    schema = re.search(r"nvsmi_device_(v\d+)\.dtd", text or "")
    try:
        # The DOCTYPE names a DTD file we never fetch; ElementTree does not resolve external entities.
        root = ET.fromstring(text.strip())
    except ET.ParseError as e:
        raise ParseError(f"nvidia-smi -q -x is not XML: {e}") from e
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi -q -x: root element is {root.tag!r}, not nvidia_smi_log")
    gpus = [_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    return SmiLog(
        # Driver 615 marks <driver_version> deprecated ("use kmd_version instead", removed with CUDA 14.0);
        # both name the same kernel-mode driver while both are printed.
        driver_version=driver_version(_text(root, "kmd_version") or _text(root, "driver_version")),
        gpus=gpus,
        schema=schema.group(1) if schema else "",
    )


def _gpu(index: int, g: ET.Element) -> Gpu:
    minor = _int(_text(g, "minor_number"))
    reasons = g.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if reasons is None:  # drivers before 535 call them throttle reasons
        reasons, prefix = g.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    remapped = g.find("remapped_rows")
    link = g.find("pci/pci_gpu_link_info")
    return Gpu(
        index=index,
        minor=index if minor is None else minor,
        name=_text(g, "product_name"),
        bus_id=_text(g, "pci/pci_bus_id") or g.get("id", ""),
        persistence=_text(g, "persistence_mode"),
        volatile_uncorrectable=uncorrectable_counts(g.find("ecc_errors/volatile")),
        aggregate_uncorrectable=uncorrectable_counts(g.find("ecc_errors/aggregate")),
        volatile_correctable=correctable_counts(g.find("ecc_errors/volatile")),
        ecc_mode=_text(g, "ecc_mode/current_ecc"),
        sram_threshold_exceeded=_text(g, "ecc_errors/aggregate/sram_threshold_exceeded") == "Yes",
        retired_sbe=_int(_text(g, "retired_pages/multiple_single_bit_retirement/retired_count")),
        retired_dbe=_int(_text(g, "retired_pages/double_bit_retirement/retired_count")),
        retired_pending=_text(g, "retired_pages/pending_retirement") == "Yes"
        or _text(g, "retired_pages/pending_blacklist") == "Yes",
        remapped_pending=_text(remapped, "remapped_row_pending") == "Yes",
        remapped_failure=_text(remapped, "remapped_row_failure") == "Yes",
        repair_pending=[
            t for t in ("channel_repair_pending", "tpc_repair_pending") if _text(g, f"ecc_errors/{t}") == "Yes"
        ],
        unrepairable_memory=_text(g, "ecc_errors/unrepairable_memory") == "Yes",
        slowdowns=[r for r in SLOWDOWN_REASONS if _text(reasons, prefix + r) == "Active"],
        benign_reasons=[r for r in BENIGN_REASONS if _text(reasons, prefix + r) == "Active"],
        pcie_gen=_int(_text(link, "pcie_gen/current_link_gen")),
        pcie_max_gen=_int(_text(link, "pcie_gen/max_link_gen")),
        pcie_device_max_gen=_int(_text(link, "pcie_gen/max_device_link_gen")),
        pcie_host_max_gen=_int(_text(link, "pcie_gen/max_host_link_gen")),
        pcie_width=_int(_text(link, "link_widths/current_link_width")),
        pcie_max_width=_int(_text(link, "link_widths/max_link_width")),
        pcie_replays=_int(_text(g, "pci/replay_counter")),
        mig_current=_text(g, "mig_mode/current_mig"),
        mig_pending=_text(g, "mig_mode/pending_mig"),
        virtualization=_text(g, "gpu_virtualization_mode/virtualization_mode"),
        architecture=_text(g, "product_architecture"),
        fabric_state=_text(g, "fabric/state"),
        fabric_status=_text(g, "fabric/status"),
        fabric_clique=_available(_text(g, "fabric/cliqueId")),
        fabric_cluster=_available(_text(g, "fabric/clusterUuid")),
        fabric_health=_available(_text(g, "fabric/health/summary")),
        fabric_bandwidth=_available(_text(g, "fabric/health/bandwidth")),
        recovery_action=_available(_text(g, "gpu_recovery_action")),
        reset_required=_text(g, "gpu_reset_status/reset_required") == "Yes",
        utilization=_int(_text(g, "utilization/gpu_util")),
        processes=[
            Process(_text(p, "pid"), _text(p, "type"), _text(p, "process_name"), _text(p, "used_memory"))
            for p in g.findall("processes/process_info")
        ],
    )


def uncorrectable_counts(section: ET.Element | None) -> dict[str, int]:
    """Every uncorrectable counter of one ECC section, by name, whatever the schema calls it.

    v11+: ``dram_uncorrectable``, ``sram_uncorrectable``; v13 splits SRAM into
    ``sram_uncorrectable_parity`` and ``sram_uncorrectable_secded``; before v11 the counters sit
    under ``<double_bit>`` per memory (``device_memory``, ``l2_cache``...) with a ``<total>``.
    Counters reading N/A (ECC off, or not on this GPU) are left out.
    """
    return _ecc_counts(section, lambda tag: "uncorrectable" in tag, "double_bit")


def correctable_counts(section: ET.Element | None) -> dict[str, int]:
    """Every corrected-error counter of one ECC section: ``dram_correctable``, ``sram_correctable`` (v11+),
    ``<single_bit>`` per memory with a ``<total>`` before v11. N/A counters are left out."""
    return _ecc_counts(section, lambda tag: tag.endswith("correctable") and "uncorrectable" not in tag, "single_bit")


def _ecc_counts(section: ET.Element | None, wanted: Callable[[str], bool], pre_v11: str) -> dict[str, int]:
    if section is None:
        return {}
    counts: dict[str, int] = {}
    for element in section:
        if wanted(element.tag) and len(element) == 0:
            value = _int(element.text or "")
            if value is not None:
                counts[element.tag] = value
    block = section.find(pre_v11)
    if block is not None:
        total = _int(_text(block, "total"))
        if total is not None:
            counts[f"{pre_v11}_total"] = total
        else:
            for part in block:
                value = _int(part.text or "")
                if value is not None:
                    counts[f"{pre_v11}_{part.tag}"] = value
    return counts


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
    for line in plain(text).splitlines():
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


def _link_lines(text: str) -> Iterator[tuple[int, int, str]]:
    """``nvidia-smi nvlink`` listings: (GPU index, link, the rest of the line) under each ``GPU n:`` header."""
    current = None
    for line in plain(text).splitlines():
        gpu = _GPU_HEADER.match(line)
        if gpu:
            current = int(gpu.group(1))
            yield current, -1, ""
            continue
        link = _LINK_LINE.fullmatch(line)
        if link and current is not None:
            yield current, int(link.group(1)), link.group(2)


def parse_nvlink_status(text: str) -> dict[int, dict[int, bool]]:
    """``nvidia-smi nvlink -s``: {gpu index: {link: up}}."""
    links: dict[int, dict[int, bool]] = {}
    for gpu, link, rest in _link_lines(text):
        state = links.setdefault(gpu, {})
        if link >= 0:
            state[link] = "inactive" not in rest.lower()
    return links


_LINK_SPEED = re.compile(r"\s*(\d+(?:\.\d+)?)\s*GB/s")


def parse_nvlink_speeds(text: str) -> dict[int, dict[int, float]]:
    """``nvidia-smi nvlink -s``: {gpu index: {link: GB/s}} of the active links (``Link 0: 53.125 GB/s``)."""
    speeds: dict[int, dict[int, float]] = {}
    for gpu, link, rest in _link_lines(text):
        found = speeds.setdefault(gpu, {})
        if link >= 0 and (speed := _LINK_SPEED.match(rest)):
            found[link] = float(speed.group(1))
    return speeds


_IMEX_NODE = re.compile(r"Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)")


@dataclass(frozen=True)
class ImexDomain:
    """``nvidia-imex-ctl -N``: the IMEX domain's state and each node's (NVIDIA IMEX guide, "IMEX Command Service")."""

    state: str
    #: Node number -> (address, status: READY when its daemon is up).
    nodes: dict[int, tuple[str, str]]


def parse_imex_domain(text: str) -> ImexDomain:
    state = ""
    nodes = {}
    for line in plain(text).splitlines():
        if line.startswith("Domain State:"):
            state = line.split(":", 1)[1].strip()
        elif match := _IMEX_NODE.match(line):
            nodes[int(match.group(1))] = (match.group(2), match.group(3))
    return ImexDomain(state, nodes)


def parse_lsmod(text: str) -> set[str]:
    """``lsmod`` or /proc/modules: the loaded module names."""
    names = {line.split()[0] for line in text.splitlines() if line.strip()}
    names.discard("Module")
    return names


def parse_lspci_gpus(text: str) -> list[str]:
    """``lspci -n -d <NVIDIA's vendor id>:``: bus ids (``1a:00.0``) of NVIDIA display controllers
    (class 0300 VGA, 0302 3D). Also the sysfs listing the check falls back to: after :data:`SYSFS_MARK`,
    ``<domain:bus:device.function> <class as 0xCCSSPP>`` per NVIDIA function.

    NVSwitches and bridges (class 0680, 0604) and audio functions (0403) are not GPUs.
    """
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("0x"):
            parts = [parts[0], parts[1][2:6], ""]
        if len(parts) >= 3 and parts[1].rstrip(":") in ("0300", "0302"):
            bus = parts[0].lower()
            found.append(bus.split(":", 1)[1] if bus.count(":") == 2 else bus)
    return found


def parse_nvlink_errors(text: str) -> dict[tuple[int, int, str], int]:
    """``nvidia-smi nvlink -e``: {(gpu, link, counter name): value} from lines ``Link n: Replay Errors: 0``."""
    counters: dict[tuple[int, int, str], int] = {}
    for gpu, link, rest in _link_lines(text):
        match = _COUNTER.fullmatch(rest) if link >= 0 else None
        if match:
            counters[(gpu, link, match.group(1).strip())] = int(match.group(2))
    return counters


def parse_ibstat(text: str) -> dict[int, dict[str, str]]:
    """``ibstat <ca>``: {port number: {"State": ..., "Rate": ..., ...}}."""
    ports: dict[int, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        port = re.match(r"^\s*Port (\d+):\s*$", line)
        if port:
            current = int(port.group(1))
            ports[current] = {}
            continue
        if current is not None and ":" in line:
            key, _, value = line.strip().partition(":")
            ports[current][key.strip()] = value.strip()
    return ports


def parse_mlxconfig(text: str, name: str) -> tuple[str, str]:
    """``mlxconfig -d DEV -e q NAME``: (Current, Next Boot) values of the parameter, "" where absent.

    With -e mlxconfig prints Default, Current and Next Boot columns; without it, or where the firmware cannot
    report Current, Next Boot alone (mstflint mlxconfig/mlxcfg_ui.cpp, printConfHeader and printSingleParam,
    which marks a row whose next value differs with "*").
    """
    for line in text.splitlines():
        fields = line.replace("*", " ").split()
        if fields[:1] == [name] and len(fields) > 1:
            values = fields[1:]
            return (values[-2] if len(values) >= 3 else ""), values[-1]
    return "", ""


def link_down_events(kernel_log: str, ports: list[str]) -> list[str]:
    """Kernel log lines where an RDMA device of ``ports`` (or its netdev) reported its link down."""
    names = [re.escape(p) for p in ports]
    pattern = re.compile(r"(" + "|".join(names) + r").*link (?:is )?(?:down|becomes? not ready)", re.IGNORECASE)
    return [line.strip() for line in kernel_log.splitlines() if names and pattern.search(line)]


def parse_dcgm_diag(text: str) -> list[tuple[str, str]]:
    """``dcgmi diag -r N -j``: (test name, status) for every result in the JSON, whatever the DCGM version nests.

    A ``runtime_error`` (the diagnostic could not run; DCGM's JSON then may hold no test at all: NVIDIA/DCGM
    ``nvvs/include/JsonResult.hpp``) is a FAIL of its own, so a run that tested nothing never reads as a pass.
    """
    import json

    try:
        data = json.loads(text[text.find("{") :]) if "{" in text else None
    except json.JSONDecodeError as e:
        raise ParseError(str(e)) from e
    if not isinstance(data, dict):
        raise ParseError("no JSON object")
    found: list[tuple[str, str]] = []

    def walk(value: object, name: str) -> None:
        if isinstance(value, dict):
            label = str(value.get("name") or value.get("test_name") or name)
            runtime_error = value.get("runtime_error")
            if isinstance(runtime_error, str) and runtime_error.strip():
                found.append((f"runtime_error ({runtime_error.strip()})", "FAIL"))
            status = value.get("status")
            if isinstance(status, str):
                found.append((label, status))
            for child in value.values():
                walk(child, label)
        elif isinstance(value, list):
            for child in value:
                walk(child, name)

    walk(data, "dcgm")
    return found
