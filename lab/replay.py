"""Replay GPU profiles on hosts without GPUs: small tools that answer with recorded outputs.

A profile is a GPU model, a count, and documented faults. :func:`build` writes, for one host,
a ``bin/`` of tools (``nvidia-smi``, ``lsmod``, ``dmesg``, ``getenforce``, ``ibstat``,
``mlxconfig``, ``vectorAdd``) that print files under ``data/``, and ``devices.sh``, which makes the
host's ``/dev/nvidia*`` (in its own mount namespace) with their SELinux labels. Put ``bin/``
first on the host's PATH and every check reads the profile as if the GPUs were there.

The outputs start from real recordings in ``recordings/`` beside this module (see SOURCES.md there);
every edit a profile makes is listed in ``PROFILES`` and in the README (validate gpu-node, "Profiles and fixtures").
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from importlib.resources import files
from itertools import combinations
from pathlib import Path
from typing import Any

from gpuready.validate.node.node import QUERY_COMMAND, QUERY_FIELDS

RECORDED = Path(str(files("gpuready.lab") / "recordings"))
BASE_XML = "a100-sxm4-80gb-535.54.03.q.xml"
DRIVER = "535.54.03"


@dataclass(frozen=True)
class Model:
    name: str
    architecture: str
    device_id: str
    pcie_gen: int
    memory_mib: int
    nvlinks: int
    #: GPU pairs joined by NVLink: "all" (SXM baseboard) or "pairs" (PCIe bridges 0-1, 2-3...).
    nvlink_peers: str
    bus_ids: tuple[str, ...]


MODELS = {
    # Dell's C4140 studies: PowerEdge C4140, 4x V100-SXM2 32 GB, hybrid cube mesh (6 links per GPU).
    "v100": Model(
        "Tesla V100-SXM2-32GB",
        "Volta",
        "1DB510DE",
        3,
        32768,
        6,
        "all",
        ("00000000:1A:00.0", "00000000:1C:00.0", "00000000:1D:00.0", "00000000:1E:00.0"),
    ),
    # Dell's vSphere study: PowerEdge R750xa, 4x A100 PCIe, NVLink-bridged pairs (3 bridges, 12 links per GPU).
    "a100": Model(
        "NVIDIA A100-PCIE-40GB",
        "Ampere",
        "20F110DE",
        4,
        40960,
        12,
        "pairs",
        ("00000000:17:00.0", "00000000:31:00.0", "00000000:B1:00.0", "00000000:CA:00.0"),
    ),
    # HGX H100: 8x H100 SXM5, 18 links per GPU through NVSwitch.
    "h100": Model(
        "NVIDIA H100 80GB HBM3",
        "Hopper",
        "233010DE",
        5,
        81559,
        18,
        "all",
        tuple(f"00000000:{b}:00.0" for b in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")),
    ),
}

#: nvbandwidth's host copies on an 8-GPU gen5 x16 host (tinygrad/open-gpu-kernel-modules issue #29; SOURCES.md).
NVBANDWIDTH = "rtx-5090-x8-h2d-d2h-tinygrad-29.txt"
#: dcgmi diag -j with each GPU's figures (DCGM's own test data, 4 GPUs; SOURCES.md) and a level-1 run of
#: DCGM 3.1.0 (8 GPUs, every test PASS): what a replayed ``dcgmi diag`` prints for the plugins the perf checks
#: run by name, and for a level (diag.dcgm).
DCGM_FIGURES = "dcgmi-diag-per-gpu-json-x4-testdiagmanagerstrings.txt"
DCGM_LEVEL_1 = "dcgmi-diag-r1-json-3.1.0-x8-jsonresulttests.txt"

SMI_DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


@dataclass
class Profile:
    model: str
    count: int
    node_class: str
    description: str
    driver: str = DRIVER
    #: GPU index -> {xml path under <gpu>: new text}
    gpu_edits: dict[int, dict[str, str]] = field(default_factory=dict)
    missing_gpus: tuple[int, ...] = ()
    nouveau: bool = False
    nvlink_down: dict[int, tuple[int, ...]] = field(default_factory=dict)
    selinux: str = "Disabled"
    wrong_labels: dict[str, str] = field(default_factory=dict)
    xid_lines: tuple[str, ...] = ()
    ib_state: str = "Active"
    ats: bool = True
    #: A recorded nvbandwidth output the host's ``nvbandwidth`` prints (none: nvbandwidth not installed).
    nvbandwidth: str = ""
    #: (nvbandwidth test, GPU index) -> the figure that replaces the recorded one (a one-field edit).
    bandwidth_edits: dict[tuple[str, int], str] = field(default_factory=dict)
    #: GPU index -> (pid, process name, used memory): a process computing on that GPU.
    processes: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    #: A recorded ``dcgmi diag -j`` output the host's ``dcgmi`` prints for named tests (none: DCGM not installed);
    #: a level (``-r 1`` ... ``-r 4``) prints :data:`DCGM_LEVEL_1`.
    dcgm: str = ""


PROFILES: dict[str, Profile] = {
    "v100-x4": Profile(
        "v100", 4, "c4140-v100", "healthy 4x V100-SXM2 (C4140), SELinux enforcing, EDR IB", selinux="Enforcing"
    ),
    "a100-x4": Profile("a100", 4, "r750xa-a100", "healthy 4x A100 PCIe in NVLink-bridged pairs (R750xa), ATS on"),
    "h100-x8": Profile("h100", 8, "hgx-h100", "healthy 8x H100 SXM5 (HGX), nvbandwidth", nvbandwidth=NVBANDWIDTH),
    "slow-gpu": Profile(
        "h100",
        8,
        "hgx-h100",
        "GPU 5: host-to-device copies at half its mates' bandwidth (nvbandwidth)",
        nvbandwidth=NVBANDWIDTH,
        bandwidth_edits={("host_to_device_memcpy_ce", 5): "28.19"},
    ),
    "busy-gpu": Profile(
        "h100",
        8,
        "hgx-h100",
        "GPU 2: another process computes on it (nvidia-smi lists it)",
        nvbandwidth=NVBANDWIDTH,
        processes={2: ("4242", "python3", "30000 MiB")},
    ),
    # Not in the lab's default set (lab/nodes.py DEFAULT_PROFILES): started by the tests that need it.
    "dcgm-only": Profile(
        "v100",
        4,
        "c4140-v100",
        "driver and DCGM 3 only (no torch, nvbandwidth or nccl-tests): dcgmi replays DCGM's recorded figures",
        selinux="Enforcing",
        dcgm=DCGM_FIGURES,
    ),
    "ecc-errors": Profile(
        "v100",
        4,
        "c4140-v100",
        "GPU 1: 2 volatile uncorrectable (DBE) errors and Xid 48",
        gpu_edits={1: {"ecc_errors/volatile/dram_uncorrectable": "2", "ecc_errors/aggregate/dram_uncorrectable": "2"}},
        xid_lines=(
            "[ 8123.456789] NVRM: Xid (PCI:0000:1c:00): 48, pid='<unknown>', name=<unknown>, "
            "An uncorrectable double bit error (DBE) has been detected on GPU in the "
            "framebuffer at partition 0, subpartition 0.",
        ),
    ),
    "driver-mismatch": Profile(
        "a100", 4, "r750xa-a100", "driver 530.30.02 installed, 535.54.03 pinned", driver="530.30.02"
    ),
    "missing-gpu": Profile("v100", 4, "c4140-v100", "GPU 3 absent (3 of 4 visible)", missing_gpus=(3,)),
    "nouveau": Profile(
        "v100", 4, "c4140-v100", "nouveau loaded instead of nvidia: nvidia-smi cannot talk to the driver", nouveau=True
    ),
    "nvlink-down": Profile("h100", 8, "hgx-h100", "GPU 5: NVLink 3 inactive", nvlink_down={5: (3,)}),
    "selinux-label": Profile(
        "v100",
        4,
        "c4140-v100",
        "SELinux enforcing, /dev/nvidia2 labelled device_t",
        selinux="Enforcing",
        wrong_labels={"nvidia2": "device_t"},
    ),
    "throttle": Profile(
        "a100",
        4,
        "r750xa-a100",
        "GPU 2: hardware thermal slowdown active at idle",
        gpu_edits={2: {"clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown": "Active"}},
    ),
}


def _node_class(model: Model, count: int, **extra: Any) -> dict[str, Any]:
    """A node class of ``count`` GPUs of ``model`` as an inventory writes it, its GPU facts the model's own (memory in
    whole GiB as data sheets give it, NVLink links, the pairs its NVLink joins)."""
    bridged = [(first, first + 1) for first in range(0, count - 1, 2)]
    pairs = combinations(range(count), 2) if model.nvlink_peers == "all" else bridged
    return {
        "gpu_model": model.name,
        "gpu_count": count,
        "gpu_memory_gib": round(model.memory_mib / 1024),
        "nvlink_links_per_gpu": model.nvlinks,
        "p2p_pairs": [list(pair) for pair in pairs],
        **extra,
    }


#: The node classes the profiles belong to, as an inventory's gpuready.node_classes.
NODE_CLASSES = {
    "c4140-v100": _node_class(MODELS["v100"], 4, fabric={"type": "infiniband", "ports": ["mlx5_0"]}),
    "r750xa-a100": _node_class(MODELS["a100"], 4, fabric={"type": "roce", "ports": ["mlx5_0"], "ats": True}),
    "hgx-h100": _node_class(MODELS["h100"], 8),
}


def lab_settings() -> dict[str, Any]:
    """gpuready settings for an inventory of replayed hosts."""
    return {
        "node_classes": NODE_CLASSES,
        "driver": {"branch": DRIVER.split(".")[0], "version": DRIVER},
        "container_runtime": "none",
        "selinux": {"expect": "any"},
        # The replayed hosts share this machine's root filesystem and install no driver packages, so the
        # 10 GiB a real node keeps for them would judge this machine's disk, not a node's: the floor the
        # local inventory uses for the same reason.
        "preflight": {"min_free_disk_gib": 1},
    }


def smi_xml(profile: Profile) -> str:
    """``nvidia-smi -q -x`` for the profile: the recorded GPU, re-identified per model and index."""
    root = ET.fromstring((RECORDED / BASE_XML).read_text().split("?>", 1)[1].split(">", 1)[1])
    template = root.find("gpu")
    assert template is not None
    root.remove(template)
    model = MODELS[profile.model]
    root.find("driver_version").text = profile.driver  # type: ignore[union-attr]
    visible = [i for i in range(profile.count) if i not in profile.missing_gpus]
    root.find("attached_gpus").text = str(len(visible))  # type: ignore[union-attr]
    for i in visible:
        gpu = copy.deepcopy(template)
        edits = {
            "product_name": model.name,
            "product_architecture": model.architecture,
            "persistence_mode": "Enabled",
            "mig_mode/current_mig": "Disabled",
            "mig_mode/pending_mig": "Disabled",
            "minor_number": str(i),
            "uuid": f"GPU-{i:08x}-{model.device_id[:4].lower()}-4e00-a000-0000{i:08x}",
            "serial": f"16505220{i:05d}",
            "pci/pci_bus_id": model.bus_ids[i],
            "pci/pci_bus": model.bus_ids[i][9:11],
            "pci/pci_device_id": model.device_id,
            "gsp_firmware_version": profile.driver,
            "fb_memory_usage/total": f"{model.memory_mib} MiB",
            "pci/pci_gpu_link_info/pcie_gen/max_link_gen": str(model.pcie_gen),
            "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen": str(model.pcie_gen),
            "pci/pci_gpu_link_info/pcie_gen/max_host_link_gen": str(model.pcie_gen),
            "pci/pci_gpu_link_info/pcie_gen/current_link_gen": str(model.pcie_gen),
            "pci/pci_gpu_link_info/pcie_gen/device_current_link_gen": str(model.pcie_gen),
            "retired_pages/pending_retirement": "No",
            **profile.gpu_edits.get(i, {}),
        }
        gpu.set("id", model.bus_ids[i])
        mig = gpu.find("mig_devices")
        if mig is not None:
            gpu.remove(mig)
        for path, value in edits.items():
            node = gpu.find(path)
            if node is None:
                raise KeyError(f"profile edit {path!r}: no such element in the recorded XML")
            node.text = value
        if i in profile.processes:
            add_process(gpu, *profile.processes[i])
        if model.architecture != "Volta":
            # Ampere and later report row remapping instead of page retirement.
            rows = gpu.find("remapped_rows")
            rows.text = None  # type: ignore[union-attr]
            for tag, value in (
                ("remapped_row_corr", "0"),
                ("remapped_row_unc", "0"),
                ("remapped_row_pending", "No"),
                ("remapped_row_failure", "No"),
            ):
                ET.SubElement(rows, tag).text = value  # type: ignore[arg-type]
        root.append(gpu)
    ET.indent(root, space="    ")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        + ET.tostring(root, encoding="unicode")
        + "\n"
    )


def add_process(gpu: ET.Element, pid: str, name: str, memory: str) -> None:
    """One ``<process_info>`` under the GPU's ``<processes>``, laid out as telegraf's a10g.xml records one
    (tests/fixtures/gpu/SOURCES.md), as a compute process (type C)."""
    processes = gpu.find("processes")
    assert processes is not None
    info = ET.SubElement(processes, "process_info")
    for tag, value in (
        ("gpu_instance_id", "N/A"),
        ("compute_instance_id", "N/A"),
        ("pid", pid),
        ("type", "C"),
        ("process_name", name),
        ("used_memory", memory),
    ):
        ET.SubElement(info, tag).text = value


def nvbandwidth(profile: Profile) -> str:
    """The recorded nvbandwidth output with the profile's edits: each a figure of one GPU's column."""
    text = (RECORDED / profile.nvbandwidth).read_text()
    for (test, gpu), value in profile.bandwidth_edits.items():
        head, found, tail = text.partition(f"Running {test}.")
        if not found:
            raise KeyError(f"profile edit {test!r}: not in the recording")
        lines = tail.split("\n")
        # The CPU's row: "0" then one figure per GPU (the column header above it has no decimals).
        row = next(n for n, line in enumerate(lines) if line.split()[:1] == ["0"] and "." in line)
        cell = list(re.finditer(r"\S+", lines[row]))[gpu + 1]
        lines[row] = lines[row][: cell.start()] + value.rjust(len(cell.group())) + lines[row][cell.end() :]
        text = head + found + "\n".join(lines)
    return text


def query_csv(profile: Profile) -> str:
    model = MODELS[profile.model]
    rows = []
    for n, i in enumerate(i for i in range(profile.count) if i not in profile.missing_gpus):
        values = {
            "index": str(n),
            "name": model.name,
            "pci.bus_id": model.bus_ids[i],
            "driver_version": profile.driver,
            "persistence_mode": "Enabled",
        }
        rows.append(", ".join(values[f] for f in QUERY_FIELDS))
    return "\n".join(rows) + "\n"


def _visible(profile: Profile) -> list[int]:
    return [i for i in range(profile.count) if i not in profile.missing_gpus]


def nvlink_status(profile: Profile) -> str:
    """``nvidia-smi nvlink -s`` (speeds as the models' NVLink generations report them)."""
    model = MODELS[profile.model]
    speed = {"v100": "25.781 GB/s", "a100": "25.000 GB/s", "h100": "26.562 GB/s"}[profile.model]
    lines = []
    for n, i in enumerate(_visible(profile)):
        lines.append(f"GPU {n}: {model.name} (UUID: GPU-{i:08x}-{model.device_id[:4].lower()}-4e00-a000-0000{i:08x})")
        for link in range(model.nvlinks):
            state = "<inactive>" if link in profile.nvlink_down.get(i, ()) else speed
            lines.append(f"\t Link {link}: {state}")
    return "\n".join(lines) + "\n"


def p2p_matrix(profile: Profile) -> str:
    """``nvidia-smi topo -p2p r``: OK where NVLink (or the switch) joins the pair."""
    model = MODELS[profile.model]
    gpus = _visible(profile)

    def joined(a: int, b: int) -> bool:
        return model.nvlink_peers == "all" or a // 2 == b // 2

    lines = [" \t" + "\t".join(f"GPU{n}" for n in range(len(gpus))) + "\t"]
    for n, a in enumerate(gpus):
        cells = ["X" if a == b else ("OK" if joined(a, b) else "CNS") for b in gpus]
        lines.append(f" GPU{n}\t" + "\t".join(cells) + "\t")
    lines += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  OK   = Status Ok",
        "  CNS  = Chipset not supported",
        "  GNS  = GPU not supported",
        "  TNS  = Topology not supported",
        "  NS   = Not supported",
        "  U    = Unknown",
    ]
    return "\n".join(lines) + "\n"


LSMOD_NVIDIA = """Module                  Size  Used by
nvidia_uvm           1523712  0
nvidia_drm             77824  0
nvidia_modeset       1290240  1 nvidia_drm
nvidia              56500224  2 nvidia_uvm,nvidia_modeset
drm_kms_helper        204800  1 nvidia_drm
drm                   614400  4 drm_kms_helper,nvidia,nvidia_drm
"""
LSMOD_NOUVEAU = """Module                  Size  Used by
nouveau              2433024  0
mxm_wmi                16384  1 nouveau
drm_ttm_helper         16384  1 nouveau
ttm                    86016  2 drm_ttm_helper,nouveau
drm_kms_helper        204800  1 nouveau
drm                   614400  4 drm_kms_helper,drm_ttm_helper,ttm,nouveau
"""


def dmesg(profile: Profile) -> str:
    if profile.nouveau:
        return "[    4.812345] nouveau 0000:1a:00.0: NVIDIA GV100 (140000a1)\n"
    return (
        f"[    5.123456] nvidia: loading out-of-tree module taints kernel.\n"
        f"[    5.234567] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {profile.driver}  "
        f"Tue Jun  6 22:20:39 UTC 2023\n"
        f"[    6.345678] nvidia-uvm: Loaded the UVM driver, major device number 509.\n"
        + "".join(line + "\n" for line in profile.xid_lines)
    )


#: The replayed dmesg stamps Xid lines this many seconds before the host's uptime when read, so the
#: event stays inside the checks' time window whatever the lab machine's uptime.
XID_AGE_SECONDS = 600


def lspci(profile: Profile) -> str:
    """``lspci -n -d 10de:`` of the profile's GPUs (every GPU of the model, a missing one included: it is
    on the bus, nvidia-smi just does not see it)."""
    model = MODELS[profile.model]
    device = model.device_id[:4].lower()
    return "".join(f"{model.bus_ids[i][9:].lower()} 0302: 10de:{device} (rev a1)\n" for i in range(profile.count))


def pci_devices(profile: Profile, folder: Path) -> Path:
    """The sysfs PCI device folders (vendor and class files) of the profile's GPUs, as ``lspci`` lists them:
    preflight reads these where a real node's kernel lists them under /sys/bus/pci/devices."""
    model = MODELS[profile.model]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(profile.count):
        slot = folder / f"0000:{model.bus_ids[i][9:].lower()}"
        slot.mkdir(exist_ok=True)
        (slot / "vendor").write_text("0x10de\n")
        (slot / "device").write_text(f"0x{model.device_id[:4].lower()}\n")
        (slot / "class").write_text("0x030200\n")  # 3D controller, the class lspci prints (0302)
    return folder


def kernel_modules(folder: Path) -> Path:
    """A modules folder holding ``<running kernel>/build``: a simulated node has its kernel headers installed
    (the lab's hosts share this machine's kernel, whose headers this machine need not have)."""
    (folder / os.uname().release / "build").mkdir(parents=True, exist_ok=True)
    return folder


def nvlink_errors(profile: Profile) -> str:
    """``nvidia-smi nvlink -e``: zero counters on every link (the layout of NVIDIA's nvidia-smi manual)."""
    model = MODELS[profile.model]
    lines = []
    for n, i in enumerate(_visible(profile)):
        lines.append(f"GPU {n}: {model.name} (UUID: GPU-{i:08x}-{model.device_id[:4].lower()}-4e00-a000-0000{i:08x})")
        for link in range(model.nvlinks):
            lines += [
                f"\t Link {link}: Replay Errors: 0",
                f"\t Link {link}: Recovery Errors: 0",
                f"\t Link {link}: CRC Errors: 0",
            ]
    return "\n".join(lines) + "\n"


def ibstat(profile: Profile) -> str:
    rate = {"v100": "100", "a100": "100", "h100": "400"}[profile.model]
    return (
        f"CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tFirmware version: 20.31.1014\n"
        f"\tHardware version: 0\n\tNode GUID: 0x0c42a10300a1b2c3\n\tSystem image GUID: 0x0c42a10300a1b2c3\n"
        f"\tPort 1:\n\t\tState: {profile.ib_state}\n\t\tPhysical state: LinkUp\n\t\tRate: {rate}\n"
        f"\t\tBase lid: 7\n\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa651e848\n"
        f"\t\tPort GUID: 0x0c42a10300a1b2c3\n\t\tLink layer: InfiniBand\n"
    )


def mlxconfig_ats(profile: Profile) -> str:
    """``mlxconfig -d DEV -e q ATS_ENABLED`` laid out as mstflint's mlxcfg_ui.cpp prints it (printConfHeader,
    printSingleParam: Default, Current and Next Boot columns)."""
    value = "True(1)" if profile.ats else "False(0)"
    return (
        "\nDevice #1:\n----------\n\nDevice type:    ConnectX6\nName:           MCX653106A-ECA_Ax\n"
        "Description:    ConnectX-6 VPI adapter card; 100Gb/s (HDR100, EDR IB and 100GbE); dual-port QSFP56\n"
        f"Device:         mlx5_0\n\n{'Configurations:':<16}{'Default':>36}{'Current':>16}{'Next Boot':>18}\n"
        f"{'*' if profile.ats else ' '}        {'ATS_ENABLED':<36}{'False(0)':<16}{value:<16}{value:<16}\n"
    )


def devices(profile: Profile) -> list[tuple[str, int, int, str]]:
    """(name, major, minor, SELinux type) of the device files the driver would create."""
    if profile.nouveau:
        return []
    nodes = [("nvidiactl", 195, 255), ("nvidia-uvm", 509, 0), ("nvidia-uvm-tools", 509, 1)]
    nodes += [(f"nvidia{i}", 195, i) for i in _visible(profile)]
    return [(n, major, minor, profile.wrong_labels.get(n, "xserver_misc_device_t")) for n, major, minor in nodes]


def _tool(name: str, body: str) -> str:
    return f"#!/bin/sh\n# Replayed {name}: prints recorded outputs (gpuready validate/node/replay.py).\n{body}"


def build(profile_name: str, dest: Path) -> Path:
    """Write the profile's tools under ``dest`` (bin/, data/, devices.sh); returns ``dest/bin``."""
    profile = PROFILES[profile_name]
    data, bin_dir = dest / "data", dest / "bin"
    data.mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "q.xml": smi_xml(profile),
        "query.csv": query_csv(profile),
        "nvlink.txt": nvlink_status(profile),
        "p2p.txt": p2p_matrix(profile),
        "lsmod.txt": LSMOD_NOUVEAU if profile.nouveau else LSMOD_NVIDIA,
        "dmesg.txt": dmesg(profile),
        "ibstat.txt": ibstat(profile),
        "mlxconfig.txt": mlxconfig_ats(profile),
        "vector-add.txt": (RECORDED / "vector-add.txt").read_text(),
        "profile.txt": profile.description + "\n",
        "smi-failure.txt": SMI_DRIVER_FAILURE,
        "lspci.txt": lspci(profile),
        "nvlink-errors.txt": nvlink_errors(profile),
    }
    pci_devices(profile, data / "pci")
    kernel_modules(data / "modules")
    if profile.nvbandwidth:
        files["nvbandwidth.txt"] = nvbandwidth(profile)
    for name, text in files.items():
        (data / name).write_text(text)
    d = shlex.quote(str(data))
    query = QUERY_COMMAND.removeprefix("nvidia-smi ")
    if profile.nouveau:
        smi = f"cat {d}/smi-failure.txt\nexit 9\n"
    else:
        smi = (
            f'case "$*" in\n  "-q -x") cat {d}/q.xml ;;\n  "{query}") cat {d}/query.csv ;;\n'
            f'  "--query-gpu=index --format=csv,noheader") cut -d, -f1 {d}/query.csv ;;\n'
            f'  "nvlink -s") cat {d}/nvlink.txt ;;\n  "topo -p2p r") cat {d}/p2p.txt ;;\n'
            f'  "nvlink -e") cat {d}/nvlink-errors.txt ;;\n'
            f'  *) echo "replay: no recording for: nvidia-smi $*" >&2; exit 2 ;;\nesac\n'
        )
    vector_add = (
        f"if [ ! -e /dev/nvidia${{CUDA_VISIBLE_DEVICES:-0}} ]; then\n"
        f"  echo 'Failed to allocate device vector A (error code no CUDA-capable device is detected)!'\n"
        f"  exit 1\nfi\ncat {d}/vector-add.txt\n"
    )
    # Xid lines get a stamp XID_AGE_SECONDS before the host's uptime now (see XID_AGE_SECONDS).
    dmesg_tool = (
        f"now=$(cut -d' ' -f1 /proc/uptime)\n"
        f'awk -v now="$now" \'/NVRM: Xid/ {{sub(/^\\[ *[0-9.]+\\]/, sprintf("[%12.6f]", '
        f"now - {XID_AGE_SECONDS}))}} {{print}}' {d}/dmesg.txt\n"
    )
    tools = {
        "nvidia-smi": smi,
        "lsmod": f"cat {d}/lsmod.txt\n",
        "dmesg": dmesg_tool,
        "lspci": f"cat {d}/lspci.txt\n",
        "getenforce": f"echo {profile.selinux}\n",
        "ibstat": f"cat {d}/ibstat.txt\n",
        "mlxconfig": f"cat {d}/mlxconfig.txt\n",
        "vectorAdd": vector_add,
    }
    if profile.nvbandwidth:  # every run prints the recording: the same figures each sample
        tools["nvbandwidth"] = f"cat {d}/nvbandwidth.txt\n"
    if profile.dcgm:
        (data / "dcgm-figures.json").write_text((RECORDED / profile.dcgm).read_text())
        (data / "dcgm-level.json").write_text((RECORDED / DCGM_LEVEL_1).read_text())
        # dcgmi diag -r <level> -j: the level-1 recording; -r <named tests>: the recording with figures.
        tools["dcgmi"] = f'case "$3" in\n  [1-4]) cat {d}/dcgm-level.json ;;\n  *) cat {d}/dcgm-figures.json ;;\nesac\n'
    for name, body in tools.items():
        path = bin_dir / name
        path.write_text(_tool(name, body))
        path.chmod(0o755)
    lines = ["#!/bin/sh", "# Device files of the profile, made inside the host's own /dev (a tmpfs).", "set -e"]
    for name, major, minor, label in devices(profile):
        lines.append(f"mknod -m 666 /dev/{name} c {major} {minor}")
        lines.append(f"setfattr -n security.selinux -v system_u:object_r:{label}:s0 /dev/{name}")
    (dest / "devices.sh").write_text("\n".join(lines) + "\n")
    return bin_dir


def profile_names(spec: str) -> list[str]:
    """``v100-x4,a100-x4*3`` -> names, refusing unknown ones."""
    names: list[str] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = re.fullmatch(r"([\w-]+)(?:\*(\d+))?", part)
        if not match or match.group(1) not in PROFILES:
            raise ValueError(f"unknown profile {part!r} (known: {', '.join(PROFILES)}; NAME*N repeats)")
        names += [match.group(1)] * int(match.group(2) or 1)
    return names
