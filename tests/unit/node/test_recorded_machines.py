"""The catalogue judged on what the GPU runbook recorded on real machines (tests/fixtures/gpu/recorded).

Each folder holds every command the catalogue ran there, as the machine answered it (stdout, stderr and
exit status), the inventory the runbook wrote for it, and the summary of ``validate gpu-node`` run live
on that machine. Replayed here, the catalogue must reach the verdicts it reached live, and those listed
below; faults are one named edit of a recorded answer, made here.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from gpuready.core import inventory
from gpuready.validate.node import checks, nvsmi
from gpuready.validate.node.checks import CHECK_IDS, run_catalogue
from gpuready.validate.node.node import Answer, Node

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "recorded"
MACHINES = sorted(p.name for p in RECORDED.iterdir() if (p / "commands.json").is_file())

#: Per machine, the checks that passed; every other check is skipped (nothing failed on these machines).
PASSED = {
    # One H100 SXM5 passed through to a Firecracker VM, driver 580.159.04: no lspci (the PCI listing comes
    # from sysfs), no NVLink, no SELinux, no Kubernetes, no DCGM/nccl-tests/nvbandwidth; cupy ran the
    # vector add.
    "h100-80gb-hbm3-580.159.04": {
        "driver.nouveau_absent",
        "driver.nvidia_module",
        "driver.nvidia_smi",
        "driver.version",
        "gpu.pci_bus",
        "gpu.count",
        "gpu.model",
        "gpu.persistence",
        "gpu.ecc_volatile",
        "gpu.ecc_correctable_rate",
        "gpu.retired_pages",
        "gpu.throttle",
        "gpu.pcie_link",
        "gpu.pcie_replay",
        "gpu.xid",
        "gpu.recovery_action",
        "compute.vector_add",
        "node.devices",
    },
}


@functools.cache
def answers(machine: str) -> dict[str, str | Answer]:
    return recorded_answers(RECORDED / machine)


def recorded_answers(folder: Path) -> dict[str, str | Answer]:
    """What benchmarks/gpu/record.py saved in ``folder``, as the catalogue's replay reads it."""
    index = json.loads((folder / "commands.json").read_text())
    return {
        command: Answer(
            command,
            int(files["rc"]),
            (folder / files["stdout"]).read_text(errors="replace"),
            (folder / files["stderr"]).read_text(errors="replace"),
        )
        for command, files in index.items()
    }


def replayed(machine: str, **edits: str | Answer) -> Node:
    inv = inventory.load(RECORDED / machine / "inventory")
    [host] = inv.hosts("gpu_nodes")
    return Node.recorded(host, inv.node_class(host), inv.settings, answers(machine) | edits)


def judged(node: Node) -> dict[str, tuple[str, str]]:
    return {c.id: (c.status, c.message) for c in run_catalogue(node)}


def test_every_recorded_machine_is_listed_with_its_source() -> None:
    assert set(MACHINES) == set(PASSED)
    sources = (RECORDED.parent / "SOURCES.md").read_text()
    for machine in MACHINES:
        assert f"`recorded/{machine}/`" in sources
        assert "## Edits" in (RECORDED / machine / "SOURCE.md").read_text()


@pytest.mark.parametrize("machine", MACHINES)
def test_replayed_verdicts_equal_the_live_ones(machine: str) -> None:
    # The live run read the machine a few seconds after the recording: statuses must agree, messages may
    # differ where the GPU's state moved (its clock reasons said gpu_idle in the recording, nothing live).
    live = json.loads((RECORDED / machine / "live-gpu-node-summary.json").read_text())
    got = {id: status for id, (status, _) in judged(replayed(machine)).items()}
    # Checks added to the catalogue after the recording are not in the live summary; nothing here measures them.
    was = {c["id"]: c["status"] for c in live["checks"]}
    assert {id: got[id] for id in was} == was
    assert got == dict.fromkeys(CHECK_IDS, "skipped") | dict.fromkeys(PASSED[machine], "passed")


#: Commands the catalogue gained after the machines were recorded. Unanswered, the replay reads the container test
#: as "not a container" (Node.recorded: a command not recorded is not installed), as the VM ran the checks itself.
AFTER_RECORDING = {checks.CONTAINER_COMMAND}


def test_every_catalogue_command_was_recorded() -> None:
    for machine in MACHINES:
        assert set(checks.PREFETCH) - AFTER_RECORDING <= set(answers(machine)), machine
        assert not AFTER_RECORDING & set(answers(machine)), "recorded now: drop it from AFTER_RECORDING"


H100 = "h100-80gb-hbm3-580.159.04"


def test_pci_listing_from_sysfs_where_lspci_is_missing() -> None:
    recorded = answers(H100)[checks.LSPCI_COMMAND]
    assert recorded.stdout == f"{nvsmi.SYSFS_MARK}\n0000:00:06.0 0x030200\n"  # the VM has no pciutils
    assert judged(replayed(H100))["gpu.pci_bus"] == ("passed", "1 GPUs on the bus, all seen by nvidia-smi")
    # One named edit: a second NVIDIA 3D controller on the bus that nvidia-smi does not list.
    lost = Answer(recorded.command, 0, recorded.stdout + "0000:00:07.0 0x030200\n", "")
    status, message = judged(replayed(H100, **{checks.LSPCI_COMMAND: lost}))["gpu.pci_bus"]
    assert (status, message) == ("failed", "2 NVIDIA GPUs on the PCI bus, nvidia-smi sees 1; not seen: 00:07.0")
    # An NVSwitch (class 0x068000) beside it is no GPU.
    switch = Answer(recorded.command, 0, recorded.stdout + "0000:00:08.0 0x068000\n", "")
    assert judged(replayed(H100, **{checks.LSPCI_COMMAND: switch}))["gpu.pci_bus"][0] == "passed"


def test_pci_listing_from_sysfs_without_nvidia_functions_is_skipped() -> None:
    empty = Answer(checks.LSPCI_COMMAND, 0, f"{nvsmi.SYSFS_MARK}\n", "")
    status, message = judged(replayed(H100, **{checks.LSPCI_COMMAND: empty}))["gpu.pci_bus"]
    assert status == "skipped" and "install pciutils" in message


def test_topology_read_through_driver_580s_terminal_escapes() -> None:
    # Driver 580 underlines the header of `nvidia-smi topo -p2p r` even into a file.
    recorded = answers(H100)["nvidia-smi topo -p2p r"].stdout
    assert "\x1b[4mGPU0" in recorded
    assert nvsmi.parse_p2p_matrix(recorded) == {(0, 0): "X"}


def test_declared_expectations_judged_on_the_real_h100() -> None:
    # What NVIDIA's H100 SXM5 data sheet gives it: PCIe gen5 x16, MIG capable (here Disabled).
    node = replayed(H100)
    node.node_class = node.node_class.model_copy(update={"pcie_gen": 5, "pcie_width": 16, "mig": False})
    verdicts = judged(node)
    assert verdicts["gpu.pcie_link"][0] == "passed"
    assert verdicts["gpu.mig"][0] == "passed"
    # An HGX class (18 NVLinks per H100) declared for this VM, whose passed-through GPU shows no links:
    # `nvidia-smi nvlink -s` printed nothing there.
    node.node_class = node.node_class.model_copy(update={"nvlink_links_per_gpu": 18})
    assert answers(H100)["nvidia-smi nvlink -s"].stdout == ""
    verdicts = judged(node)
    assert verdicts["topology.nvlink"] == ("failed", "GPU 0: 0/18 links up")
    # No counters were printed either: that is no evidence of healthy links, so no pass.
    assert verdicts["topology.nvlink_errors"][0] == "skipped"


def test_inside_a_container_the_hosts_own_files_are_not_judged() -> None:
    # One named edit: the container test answers as it does where Docker's marker is (a Kubernetes node's
    # container_runtime and kubelet asked for too, which the VM had not).
    inside = Answer(checks.CONTAINER_COMMAND, 0, "docker /.dockerenv\n", "")
    kubelet = Answer(checks.commands.KUBELET_COMMAND, 0, "", "")
    node = replayed(H100, **{checks.CONTAINER_COMMAND: inside, checks.commands.KUBELET_COMMAND: kubelet})
    node.settings = node.settings.model_copy(update={"container_runtime": "containerd"})
    verdicts = judged(node)
    for id, what in [
        ("node.container_runtime", f"{checks.RUNTIME_CONFIG['containerd'][0]} is the image's"),
        ("node.device_plugin_socket", "/var/lib/kubelet"),
    ]:
        status, message = verdicts[id]
        assert status == "skipped", (id, message)
        said = "not judged: the checks run inside a container (Docker's /.dockerenv is there)"
        assert message.startswith(said), message
        assert what in message and "`gpuready validate gpu-node` over SSH on the node" in message
    # node.devices reads the container's own /dev: still judged (the VM's device files are all there).
    assert verdicts["node.devices"][0] == "passed"
    # Outside a container the kubelet's directory is the host's: the socket is judged (and missing here).
    outside = replayed(H100, **{checks.commands.KUBELET_COMMAND: kubelet})
    assert judged(outside)["node.device_plugin_socket"][0] == "failed"


def test_inside_a_container_fabric_manager_judges_the_fabric_not_the_service() -> None:
    # Named edits: the VM's class declared NVSwitch (its H100 registered with no fabric: N/A), and the container
    # test answering as where podman's marker is. systemctl there asks the container: the service is not judged.
    inside = Answer(checks.CONTAINER_COMMAND, 0, "podman /run/.containerenv\n", "")
    verdicts = []
    for edits in ({}, {checks.CONTAINER_COMMAND: inside}):
        node = replayed(H100, **edits)
        node.node_class = node.node_class.model_copy(update={"nvswitch": True})
        verdicts.append(judged(node)["node.fabric_manager"])
    assert verdicts[0] == ("failed", "nvidia-fabricmanager is not installed; GPU 0: fabric N/A/N/A")
    assert verdicts[1] == ("failed", "GPU 0: fabric N/A/N/A")
