"""Preflight reads the PCI bus: NVIDIA GPUs and NVSwitches, from a sysfs tree laid out as the kernel does.

The devices are the PCI ID database's own (pciutils' pci.ids, Debian package pci.ids): vendor 10de's
A100 SXM4 GPU and A100 NVSwitch entries, with the class codes of the same file's class list (03/02
3D controller, 06/80 other bridge). An HGX A100 baseboard carries eight GPUs and six NVSwitches (NVIDIA
DGX A100 user guide, "Hardware overview"). An HGX B200 baseboard has no NVSwitch on the host's bus: one
ConnectX-7 function (pci.ids 15b3 ConnectX-7, class 02/07 Infiniband controller) with SW_MNG in its VPD per NVSwitch
management function that a recorded HGX B200 Fabric Manager listed (tests/fixtures/pci/SOURCES.md says what is
recorded and what is made here: the VPD bytes).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.core.runner import run_playbook
from tests.conftest import ModuleTmp, require
from tests.integration.provision import recorded_facts

pytestmark = pytest.mark.slow

PCI_IDS = Path("/usr/share/misc/pci.ids")
B200_FM_LOG = Path(__file__).parents[2] / "fixtures" / "pci" / "hgx-b200-fabricmanager-wrapper-siderolabs-893.log"


def _pci_ids(vendor_id: str = "10de") -> tuple[dict[str, str], dict[str, str]]:
    """A vendor's devices (id -> name) and the class list (cc+subclass -> name) of pci.ids."""
    require(PCI_IDS.is_file(), "pci.ids is missing: scripts/install-system-deps installs pciutils")
    devices: dict[str, str] = {}
    classes: dict[str, str] = {}
    vendor = klass = None
    for line in PCI_IDS.read_text(errors="replace").splitlines():
        if m := re.match(r"^([0-9a-f]{4})\s+(.*)$", line):
            vendor, klass = m.group(1), None
        elif m := re.match(r"^C ([0-9a-f]{2})\s+(.*)$", line):
            vendor, klass = None, m.group(1)
        elif m := re.match(r"^\t([0-9a-f]{2,4})\s+(.*)$", line):
            if vendor == vendor_id:
                devices[m.group(1)] = m.group(2)
            elif klass is not None:
                classes[klass + m.group(1)] = m.group(2)
    return devices, classes


def _nvlink5_bus(folder: Path) -> Path:
    """Eight GPUs, no NVIDIA bridge, and the NVSwitch management functions of the recorded HGX B200 (one ConnectX-7
    function each, SW_MNG in its VPD) beside one ConnectX-7 NIC (VPD without it)."""
    bus = _bus(folder, gpus=8, nvswitches=0)
    managers = re.findall(r"found NVSwitch LPF: device=(mlx5_\d+)", B200_FM_LOG.read_text())
    assert sorted(managers) == ["mlx5_10", "mlx5_11", "mlx5_8", "mlx5_9"]
    devices, classes = _pci_ids("15b3")
    cx7 = next(d for d, name in devices.items() if name.endswith("[ConnectX-7]"))
    assert classes["0207"] == "Infiniband controller"
    for n, vpd in enumerate([b"SMDL=SW_MNG"] * len(managers) + [b"SMDL=NIC"]):
        slot = bus / f"0000:{0x40 + n:02x}:00.0"
        slot.mkdir()
        (slot / "vendor").write_text("0x15b3\n")
        (slot / "device").write_text(f"0x{cx7}\n")
        (slot / "class").write_text("0x020700\n")
        (slot / "vpd").write_bytes(b"\x82\x10ConnectX-7 bridge\x90\x10" + vpd + b"\x78")
    return bus


def _bus(folder: Path, gpus: int, nvswitches: int) -> Path:
    devices, classes = _pci_ids()
    gpu = next(d for d, name in devices.items() if name.endswith("[A100 SXM4 80GB]"))
    nvswitch = next(d for d, name in devices.items() if "NVSwitch" in name)
    assert classes["0302"] == "3D controller" and classes["0680"] == "Bridge"
    folder.mkdir(parents=True)
    layout = [(gpu, "0x030200")] * gpus + [(nvswitch, "0x068000")] * nvswitches
    for n, (device, klass) in enumerate(layout):
        slot = folder / f"0000:{0x10 + n:02x}:00.0"
        slot.mkdir()
        (slot / "vendor").write_text("0x10de\n")
        (slot / "device").write_text(f"0x{device}\n")
        (slot / "class").write_text(f"{klass}\n")
    return folder


@pytest.fixture(scope="module")
def preflight(module_tmp: ModuleTmp) -> Any:
    tmp = module_tmp("preflight-pci")
    hgx = _bus(tmp / "hgx", gpus=8, nvswitches=6)
    no_switches = _bus(tmp / "pcie", gpus=8, nvswitches=0)
    b200 = _nvlink5_bus(tmp / "b200")
    hosts = {
        "hgx-as-hgx": {"gpuready_node_class": "hgx", "preflight_pci_devices": str(hgx)},
        "hgx-as-pcie": {"gpuready_node_class": "pcie", "preflight_pci_devices": str(hgx)},
        "pcie-as-hgx": {"gpuready_node_class": "hgx", "preflight_pci_devices": str(no_switches)},
        "pcie-as-pcie": {"gpuready_node_class": "pcie", "preflight_pci_devices": str(no_switches)},
        "b200-as-hgx": {"gpuready_node_class": "hgx", "preflight_pci_devices": str(b200)},
        "b200-as-pcie": {"gpuready_node_class": "pcie", "preflight_pci_devices": str(b200)},
    }
    settings = {
        "node_classes": {
            "hgx": {"gpu_count": 8, "gpu_model": "NVIDIA A100-SXM4-80GB", "nvswitch": True},
            "pcie": {"gpu_count": 8, "gpu_model": "NVIDIA A100-SXM4-80GB"},
        },
        "driver": {"branch": "550"},
        "container_runtime": "none",
        "preflight": {"min_free_disk_gib": 0, "stop_on_failure": False},
    }
    return run_playbook(
        "site.yml", _local_inventory(tmp / "inventory", hosts, settings), tmp / "runs", check=True, tags=["preflight"]
    )


def _local_inventory(folder: Path, hosts: dict[str, dict[str, Any]], settings: dict[str, Any]) -> Path:
    """GPU nodes that are all this machine (a local connection, Ansible's own Python)."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": local}}))
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
    return folder


def _finding(run: Any, host: str, check: str) -> Any:
    return next(c for c in run.hosts[host].checks if c.id == check)


def test_preflight_counts_gpus_apart_from_nvswitches(preflight: Any) -> None:
    gpus = _finding(preflight, "hgx-as-hgx", "preflight.gpus")
    assert gpus.status == "passed" and gpus.message.startswith("8 NVIDIA GPUs")


def test_nvswitches_on_the_bus_of_an_nvswitch_class_pass(preflight: Any) -> None:
    found = _finding(preflight, "hgx-as-hgx", "preflight.nvswitch")
    assert found.status == "passed"
    assert found.message == "6 NVSwitches on the PCI bus: the driver role installs Fabric Manager"


def test_nvswitches_on_a_class_without_them_fail_saying_what_to_set(preflight: Any) -> None:
    found = _finding(preflight, "hgx-as-pcie", "preflight.nvswitch")
    assert found.status == "failed"
    assert "6 NVSwitches on the PCI bus but node class pcie has nvswitch: false" in found.message
    assert found.remedy == "set nvswitch: true in gpuready.node_classes.pcie"


def test_an_nvswitch_class_without_nvswitches_fails(preflight: Any) -> None:
    found = _finding(preflight, "pcie-as-hgx", "preflight.nvswitch")
    assert (found.status, found.message) == ("failed", "node class hgx expects NVSwitches, none on the PCI bus")
    assert _finding(preflight, "pcie-as-pcie", "preflight.nvswitch").status == "passed"


def test_an_nvlink5_baseboard_is_known_by_its_nvswitch_management_bridges(preflight: Any) -> None:
    # No NVIDIA bridge on an HGX B200's bus: the ConnectX-7 functions with SW_MNG in their VPD are its NVSwitch fabric.
    found = _finding(preflight, "b200-as-hgx", "preflight.nvswitch")
    assert found.status == "passed"
    assert found.message == (
        "4 NVSwitch management bridges (ConnectX-7, SW_MNG) on the PCI bus: an NVLink 5 baseboard: "
        "the driver role installs Fabric Manager"
    )
    # The NIC (VPD without SW_MNG, slot 0000:44:00.0) is not one of them.
    assert "0000:40:00.0, 0000:41:00.0, 0000:42:00.0, 0000:43:00.0" in found.evidence
    assert "0000:44:00.0" not in found.evidence
    wrong = _finding(preflight, "b200-as-pcie", "preflight.nvswitch")
    assert wrong.status == "failed" and "node class pcie has nvswitch: false" in wrong.message
    assert _finding(preflight, "b200-as-hgx", "preflight.gpus").status == "passed"


def test_preflight_reports_the_secure_boot_state_as_mokutil_reads_it(preflight: Any) -> None:
    require(shutil.which("mokutil") is not None, "mokutil is missing: scripts/install-system-deps installs it")
    asked = subprocess.run(["mokutil", "--sb-state"], capture_output=True, text=True, check=False)
    said = (asked.stdout + asked.stderr).strip()
    found = _finding(preflight, "hgx-as-hgx", "preflight.secure_boot")
    assert found.status == "passed"
    assert said in found.evidence
    if "SecureBoot enabled" in said:
        assert found.message.startswith("Secure Boot is on")
    else:  # "SecureBoot disabled", or "EFI variables are not supported on this system" (BIOS boot)
        assert found.message == "Secure Boot is off: unsigned modules load"


def test_preflight_reports_the_running_kernels_headers_and_nouveau_as_the_node_has_them(preflight: Any) -> None:
    """Read here without Ansible: the headers' build link of the running kernel, else what apt offers; nouveau."""
    kernel = os.uname().release
    build = Path("/lib/modules") / kernel / "build"
    found = _finding(preflight, "hgx-as-hgx", "preflight.kernel_headers")
    if build.exists() or build.is_symlink():
        assert (found.status, found.message) == ("passed", f"headers for kernel {kernel} are installed")
        assert found.evidence == f"{build} exists"
    else:
        require(shutil.which("apt-cache") is not None, "this check of the headers needs apt (Debian, Ubuntu)")
        policy = subprocess.run(
            ["apt-cache", "policy", f"linux-headers-{kernel}"], capture_output=True, text=True, check=False
        ).stdout
        offered = "Candidate:" in policy and "Candidate: (none)" not in policy
        assert found.evidence.startswith(f"{build} missing")
        if offered:
            assert (found.status, found.message) == (
                "passed",
                f"headers for kernel {kernel} are available from the package manager",
            )
        else:
            assert found.status == "failed"
            assert found.message == f"no headers for the running kernel {kernel}, installed or available"
    nouveau = _finding(preflight, "hgx-as-hgx", "preflight.nouveau")
    if Path("/sys/module/nouveau").exists():
        assert nouveau.message == "nouveau is loaded; the driver role blacklists it and the node needs a reboot"
    else:
        assert nouveau.message == "nouveau is not loaded"


def test_preflight_asks_dnf_for_the_running_kernels_devel_package_on_el(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the headers missing, an EL 8 node is asked `dnf -q list --available kernel-devel-<kernel>` (NVIDIA's
    driver installation guide: the kernel-devel of the running kernel). The node is this machine with the
    recorded RHEL 8 facts; dnf is a script that logs its arguments and answers as dnf lists a package."""
    kernel = recorded_facts.facts("rhel-8", None)["kernel"]
    require(not (Path("/lib/modules") / kernel / "build").exists(), f"this machine has /lib/modules/{kernel}")
    # The recording's mounts were cut; preflight's disk finding reads them.
    recorded_facts.fact_cache(tmp_path / "facts", {"el8": ("rhel-8", {"mounts": []})})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "dnf-args"
    dnf = bin_dir / "dnf"
    listed = f"kernel-devel.x86_64    {kernel.removesuffix('.x86_64')}    rhel-8-for-x86_64-baseos-rpms"
    dnf.write_text(f'#!/bin/sh\necho "$@" > {asked}\necho "Available Packages"\necho "{listed}"\n')
    dnf.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    settings = {
        "node_classes": {"pcie": {"gpu_count": 1, "gpu_model": "NVIDIA A100-SXM4-80GB"}},
        "driver": {"branch": "550"},
        "container_runtime": "none",
        "preflight": {"stop_on_failure": False},  # no GPU on this bus: preflight.gpus fails, the rest goes on
    }
    inventory = _local_inventory(tmp_path / "inventory", {"el8": {}}, settings)
    run = run_playbook(
        "site.yml", inventory, tmp_path / "runs", check=True, tags=["preflight"], fact_cache=tmp_path / "facts"
    )
    assert asked.read_text().split() == ["-q", "list", "--available", f"kernel-devel-{kernel}"]
    found = _finding(run, "el8", "preflight.kernel_headers")
    assert (found.status, found.message) == (
        "passed",
        f"headers for kernel {kernel} are available from the package manager",
    )
    assert found.evidence == f"/lib/modules/{kernel}/build missing; Available Packages\n{listed}"
