"""The catalogue judged on real ``nvidia-smi -q -x`` captures of many GPUs, drivers and schemas.

Each capture is a node as it was recorded: only nvidia-smi and lsmod answer, none of the optional
tools (vectorAdd, DCGM, nccl-tests, nvbandwidth) is installed, the node class is the capture's own
model and count. Every check's verdict is asserted per capture; faults are one named field edit of a
real capture, made here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuready.core.settings import NodeChecks, NodeClass, Settings
from gpuready.lab import replay
from gpuready.validate.node import checks, nvsmi
from gpuready.validate.node.checks import CHECK_IDS, run_catalogue
from gpuready.validate.node.node import Answer, Node

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
# The lab's replayed recordings ship with gpuready.lab (lab/recordings); they are captures too.
CAPTURES = {p.name: p for p in sorted([*FIXTURES.glob("*/*.xml"), *replay.RECORDED.glob("*.xml")])}

#: What a host without the optional tools prints for the catalogue's own probe commands.
BARE = {
    checks.VECTOR_ADD_COMMAND: "== no program\n",
    checks.DCGM_COMMAND: "== no dcgmi\n",
    checks.NCCL_COMMAND: "== not installed\n",
    checks.NVBANDWIDTH_COMMAND: "== not installed\n",
    checks.PROBE_COMMAND: "== no torch\n",
}

#: Verdicts on a node with the driver loaded and nothing else declared by its class.
BASE = dict.fromkeys(CHECK_IDS, "skipped") | {
    "driver.nouveau_absent": "passed",
    "driver.nvidia_module": "passed",
    "driver.nvidia_smi": "passed",
    "driver.version": "passed",
    "gpu.count": "passed",
    "gpu.model": "passed",
    "gpu.persistence": "passed",
    "gpu.ecc_volatile": "passed",
    "gpu.retired_pages": "passed",
    "gpu.throttle": "passed",
    "gpu.pcie_link": "passed",
    "gpu.pcie_replay": "passed",
    "node.devices": "passed",
}

#: Per capture: what differs from BASE, and why (the capture's own facts). A link narrower than the GPU's
#: maximum width fails gpu.pcie_link unless the node class declares the narrower slot (pcie_width).
NARROW = {"gpu.pcie_link": "failed"}
EXPECTED: dict[str, dict[str, str]] = {
    # Persistence mode Disabled as recorded: nobody enabled nvidia-persistenced on these hosts.
    "a100-sxm4-80gb-535.54.03.q.xml": {"gpu.persistence": "failed"},
    "a100-sxm4-v12.xml": {"gpu.persistence": "failed"},
    "a10g.xml": {"gpu.persistence": "failed", **NARROW},  # x8 of x16
    "gtx-1660-ti.xml": {"gpu.persistence": "failed"},
    "quadro-p400.xml": {"gpu.persistence": "failed"},
    "tesla-t4.xml": {"gpu.persistence": "failed", **NARROW},  # x8 of x16
    "v100s-pcie-32gb-x8-460.73.01-v11.xml": {"gpu.persistence": "failed"},  # a Volta VM under load
    # Schema v10 without <driver_version>: the version cannot be told, so it is skipped, not failed.
    "gtx-1070-ti.xml": {"driver.version": "skipped", "gpu.pcie_replay": "skipped"},
    "quadro-p2000-v12.xml": NARROW,  # x8 of x16
    "rtx-3060-v12.xml": {},
    "rtx-3080-v12.xml": {},  # persistence N/A (a Windows passthrough guest): not a failure
    "rtx-3090-v12.xml": {},
    # A vGPU guest (GRID P4-1Q): persistence, PCIe (replay counter too), minor number, clock reasons all N/A.
    "tesla_p4.xml": {"gpu.pcie_replay": "skipped"},
    "dual-rtx-2070-590.44.01-v13.xml": NARROW,  # two GPUs at x8 of x16 (a consumer board's slots)
    "rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml": {},  # gen5 GPU in a gen4 host: reported, not failed
    # One GPU of an 8x H100 SXM HGX board (driver 580, schema v13, fabric registered): it recorded 150 PCIe
    # replays, a rate only with the uptime, which was not recorded; everything else passes.
    "hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml": {"gpu.pcie_replay": "skipped"},
    # A T4 on AWS g4dn with driver 595 (schema v13, newer than any other capture): remapped_rows is the text
    # N/A (Turing has no row remapper), one corrected error in its lifetime (aggregate, not judged), x8 of x16.
    "qx-t4.xml": NARROW,
    # An L40S (Ada Lovelace) on AWS g6e with driver 595: row remapper with the newer *_inactive counters,
    # unrepairable_memory N/A, x8 of x16.
    "qx-l40s.xml": NARROW,
    # An A100-SXM4-40GB in a rented single-GPU VM with driver 570 (schema v12, gpu_reset_status deprecated text).
    "qx-a100.xml": {},
    # One GPU of an 8x B200 HGX node (driver 580, schema v13, fabric Completed/Success, health summary Healthy);
    # persistence Disabled as recorded.
    "hgx-b200-x8-580.105.08-v13.xml": {"gpu.persistence": "failed"},
    # One GPU of a 4x GB200 arm64 Grace host in a fabric cluster (driver 580.173.02, C2C, fabric Completed/Success
    # with a clique): healthy as recorded, unrepairable_memory No.
    "gb200-x4-arm64-580.173.02-v13.xml": {},
    # One GPU of a 4x GB300 (driver 580.173.02, virtualization None, PCIe gen6 x16): healthy, unrepairable_memory No.
    "gb300-x4-580.173.02-v13.xml": {},
    # One GPU of a pre-release 4x Rubin node (driver 615.23, "NVIDIA Graphics Device"): it recorded
    # ecc_errors/unrepairable_memory Yes, NVML's flag for memory its repair cannot fix; x2 of x16.
    "rubin-vr-nvl72-x4-615.23-v13.xml": {"gpu.retired_pages": "failed", **NARROW},
}


def devices_listing(xml: str) -> str:
    """What the devices probe prints on a host where the driver made its device files (one per GPU minor)."""
    minors = [g.minor for g in nvsmi.parse_xml(xml).gpus]
    return "".join(
        f"{p} character\n" for p in ["/dev/nvidiactl", "/dev/nvidia-uvm", *(f"/dev/nvidia{m}" for m in minors)]
    )


def node_for(
    xml: str,
    name: str = "node",
    dmesg: str | None = None,
    answers: dict[str, str | Answer] | None = None,
    **node_class: object,
) -> Node:
    log = nvsmi.parse_xml(xml)
    nc = NodeClass(**{"gpu_model": log.gpus[0].name, "gpu_count": len(log.gpus), **node_class})
    driver = log.driver_version or "535.54.03"
    settings = Settings(
        node_classes={"c": nc}, container_runtime="none", driver={"branch": driver.split(".")[0], "version": driver}
    )
    recorded: dict[str, str | Answer] = {
        "nvidia-smi -q -x": xml,
        checks.MODULES_COMMAND: replay.LSMOD_NVIDIA,
        checks.DEVICES_COMMAND: devices_listing(xml),
        **BARE,
    }
    if dmesg is not None:
        recorded |= {"dmesg": dmesg, checks.UPTIME_COMMAND: "5100.00 10000.00\n"}
    return Node.recorded(name, nc, settings, recorded | (answers or {}))


def verdicts(node: Node) -> dict[str, str]:
    return {c.id: c.status for c in run_catalogue(node)}


def edit(xml: str, path: str, value: str, gpu: int = 0) -> str:
    """One named field edit of a capture: the text of ``<gpu>[gpu]/path``."""
    import xml.etree.ElementTree as ET

    head, _, body = xml.partition("<nvidia_smi_log>")
    root = ET.fromstring("<nvidia_smi_log>" + body)
    element = root.findall("gpu")[gpu].find(path)
    assert element is not None, f"{path} not in this capture"
    element.text = value
    return head + ET.tostring(root, encoding="unicode")


def capture(name: str) -> str:
    return CAPTURES[name].read_text()


def test_every_capture_is_listed_with_its_expected_verdicts() -> None:
    assert set(EXPECTED) == set(CAPTURES)
    sources = (FIXTURES / "SOURCES.md").read_text() + (replay.RECORDED / "SOURCES.md").read_text()
    for path in CAPTURES.values():
        assert f"`{path.parent.name}/{path.name}`" in sources, f"{path.name} has no SOURCES.md row"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_check_on_every_capture(name: str) -> None:
    got = verdicts(node_for(capture(name)))
    # Drivers from 550 report gpu_recovery_action (None on every capture here); older ones have no such field.
    reports = {"gpu.recovery_action": "passed"} if "<gpu_recovery_action>" in capture(name) else {}
    assert got == BASE | reports | EXPECTED[name]


def test_schemas_and_generations_covered() -> None:
    logs = {n: nvsmi.parse_xml(capture(n)) for n in CAPTURES}
    assert {log.schema for log in logs.values()} >= {"v10", "v11", "v12", "v13"}
    architectures = {g.architecture for log in logs.values() for g in log.gpus}
    assert {"Pascal", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "Rubin"} <= architectures


# ---------------------------------------------------------------- ECC: every counter of every schema
@pytest.mark.parametrize(
    ("name", "counter"),
    [
        ("tesla-t4.xml", "dram_uncorrectable"),  # v11
        ("a100-sxm4-v12.xml", "sram_uncorrectable"),  # v12
        ("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml", "sram_uncorrectable_parity"),  # v13 splits SRAM
        ("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml", "sram_uncorrectable_secded"),
        ("qx-t4.xml", "sram_uncorrectable"),  # v13 on Turing keeps one SRAM counter
        ("qx-t4.xml", "dram_uncorrectable"),
        ("qx-l40s.xml", "sram_uncorrectable_secded"),
        ("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml", "dram_uncorrectable"),
    ],
)
def test_one_volatile_uncorrectable_counter_fails_ecc(name: str, counter: str) -> None:
    node = node_for(edit(capture(name), f"ecc_errors/volatile/{counter}", "1"))
    [ecc] = [c for c in run_catalogue(node) if c.id == "gpu.ecc_volatile"]
    assert ecc.status == "failed"
    assert f"{counter}=1" in ecc.message


def test_a_fault_on_the_second_gpu_names_that_gpu() -> None:
    xml = edit(capture("dual-rtx-2070-590.44.01-v13.xml"), "retired_pages/pending_retirement", "Yes", gpu=1)
    status, message = one(node_for(xml), "gpu.retired_pages")
    assert (status, message) == ("failed", "GPU 1 (00000000:02:00.0): page retirement pending")
    [link] = [c for c in run_catalogue(node_for(xml)) if c.id == "gpu.pcie_link"]
    assert link.message.count("width x8 < the GPU's x16") == 2
    assert "GPU 1 (00000000:02:00.0): width x8" in link.message


def test_volta_double_bit_total_counts() -> None:
    # A v11 Volta capture keeps the old layout, with a <total> beside the per-memory counters.
    xml = edit(capture("v100s-pcie-32gb-x8-460.73.01-v11.xml"), "ecc_errors/volatile/double_bit/total", "1")
    status, message = one(node_for(xml), "gpu.ecc_volatile")
    assert (status, message) == (
        "failed",
        "GPU 0 (00000000:00:0D.0): 1 volatile uncorrectable ECC errors (double_bit_total=1)",
    )


def test_pre_v11_double_bit_total_counts() -> None:
    xml = capture("quadro-p400.xml")  # schema before v11: <volatile><double_bit>...<total>
    assert verdicts(node_for(edit(xml, "ecc_errors/volatile/double_bit/total", "3")))["gpu.ecc_volatile"] == "failed"


def test_aggregate_only_is_reported_not_failed() -> None:
    node = node_for(edit(capture("tesla-t4.xml"), "ecc_errors/aggregate/dram_uncorrectable", "4"))
    [ecc] = [c for c in run_catalogue(node) if c.id == "gpu.ecc_volatile"]
    assert ecc.status == "passed" and "4 uncorrectable in its lifetime" in ecc.message


def test_sram_threshold_exceeded_fails() -> None:
    xml = edit(
        capture("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml"), "ecc_errors/aggregate/sram_threshold_exceeded", "Yes"
    )
    assert verdicts(node_for(xml))["gpu.ecc_volatile"] == "failed"


# ---------------------------------------------------------------- corrected-error rate
UPTIME_85_MIN = {checks.UPTIME_COMMAND: "5100.00 10000.00\n"}  # 1.42 h: the volatile counters' window


@pytest.mark.parametrize(
    "name",
    [
        "a100-sxm4-v12.xml",
        "a10g.xml",
        "tesla-t4.xml",
        "a100-sxm4-80gb-535.54.03.q.xml",
        "v100s-pcie-32gb-x8-460.73.01-v11.xml",
        "qx-t4.xml",  # one corrected error in its lifetime (aggregate): not a rate since boot
        "hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml",
    ],
)
def test_healthy_captures_pass_the_corrected_error_rate(name: str) -> None:
    status, message = one(node_for(capture(name), answers=UPTIME_85_MIN), "gpu.ecc_correctable_rate")
    assert (status, message) == ("passed", "at most 0.0 corrected errors/h (< 10/h)")


@pytest.mark.parametrize(
    ("name", "path", "value", "status"),
    [
        # DCGM's limit, 10 per hour: 14 in 1.42 h is 9.9/h, 15 is 10.6/h.
        ("a100-sxm4-v12.xml", "ecc_errors/volatile/dram_correctable", "14", "passed"),
        ("a100-sxm4-v12.xml", "ecc_errors/volatile/dram_correctable", "15", "failed"),
        ("tesla-t4.xml", "ecc_errors/volatile/sram_correctable", "400", "failed"),
        ("quadro-p400.xml", "ecc_errors/volatile/single_bit/device_memory", "40", "failed"),  # pre-v11 layout
        ("v100s-pcie-32gb-x8-460.73.01-v11.xml", "ecc_errors/volatile/single_bit/total", "40", "failed"),  # Volta
        # The aggregate (lifetime) counter is not a rate since boot.
        ("a100-sxm4-v12.xml", "ecc_errors/aggregate/dram_correctable", "5000", "passed"),
    ],
)
def test_one_corrected_error_counter_edit(name: str, path: str, value: str, status: str) -> None:
    got, message = one(node_for(edit(capture(name), path, value), answers=UPTIME_85_MIN), "gpu.ecc_correctable_rate")
    assert got == status, message
    if status == "failed":
        assert message.startswith("GPU 0 (") and f"{value} corrected in 1.4 h" in message


def test_corrected_errors_just_after_boot_count_over_one_hour() -> None:
    xml = edit(capture("a100-sxm4-v12.xml"), "ecc_errors/volatile/dram_correctable", "9")
    answers = {checks.UPTIME_COMMAND: "600.00 1000.00\n"}  # 9 in 10 minutes: 9 in the first hour, not 54/h
    assert one(node_for(xml, answers=answers), "gpu.ecc_correctable_rate")[0] == "passed"


@pytest.mark.parametrize(
    ("name", "field", "value", "limit", "check_id"),
    [
        (
            "a100-sxm4-v12.xml",
            "ecc_errors/volatile/dram_correctable",
            "900",
            "correctable_errors_per_hour",
            "gpu.ecc_correctable_rate",
        ),
        ("tesla-t4.xml", "pci/replay_counter", "90000", "pcie_replays_per_minute", "gpu.pcie_replay"),
    ],
)
def test_a_rate_limit_of_0_turns_its_check_off(name: str, field: str, value: str, limit: str, check_id: str) -> None:
    node = node_for(edit(capture(name), field, value), answers=UPTIME_85_MIN)
    node.settings = node.settings.model_copy(update={"node_checks": NodeChecks(**{limit: 0})})
    assert one(node, check_id)[0] == "skipped"


def test_corrected_error_rate_not_applicable() -> None:
    # GeForce without ECC: every counter N/A.
    status, message = one(node_for(capture("rtx-3090-v12.xml"), answers=UPTIME_85_MIN), "gpu.ecc_correctable_rate")
    assert status == "skipped" and "no GPU reports corrected-error counters" in message


# ---------------------------------------------------------------- retired pages, row remapping
@pytest.mark.parametrize(
    ("path", "value", "status"),
    [
        # NVIDIA DCGM's DCGM_LIMIT_MAX_RETIRED_PAGES: single- plus double-bit >= 63 fails.
        ("retired_pages/double_bit_retirement/retired_count", "62", "passed"),
        ("retired_pages/double_bit_retirement/retired_count", "63", "failed"),
        ("retired_pages/multiple_single_bit_retirement/retired_count", "62", "passed"),
        ("retired_pages/multiple_single_bit_retirement/retired_count", "63", "failed"),
        ("retired_pages/pending_retirement", "Yes", "failed"),
        ("retired_pages/pending_blacklist", "Yes", "failed"),
    ],
)
def test_retired_pages_on_t4(path: str, value: str, status: str) -> None:
    assert verdicts(node_for(edit(capture("tesla-t4.xml"), path, value)))["gpu.retired_pages"] == status


@pytest.mark.parametrize("field", ["remapped_row_pending", "remapped_row_failure"])
def test_row_remapping_pending_or_failed(field: str) -> None:
    node = node_for(edit(capture("a10g.xml"), f"remapped_rows/{field}", "Yes"))
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.retired_pages"]
    assert check.status == "failed"
    assert ("failed" if field.endswith("failure") else "pending") in check.message


def test_blackwell_channel_repair_pending() -> None:
    xml = edit(capture("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml"), "ecc_errors/channel_repair_pending", "Yes")
    assert verdicts(node_for(xml))["gpu.retired_pages"] == "failed"


RUBIN = "rubin-vr-nvl72-x4-615.23-v13.xml"


def test_recorded_unrepairable_memory_fails_with_evidence_and_remedy() -> None:
    [check] = [c for c in run_catalogue(node_for(capture(RUBIN))) if c.id == "gpu.retired_pages"]
    assert (check.status, check.message) == (
        "failed",
        "GPU 0 (00000002:81:00.0): memory flagged unrepairable (ecc_errors/unrepairable_memory Yes)",
    )
    assert "unrepairable_memory=True" in check.evidence
    assert "memory unrepairable: drain, run the field diagnostics, RMA" in check.remedy


@pytest.mark.parametrize(
    ("name", "value", "status"),
    [
        ("gb200-x4-arm64-580.173.02-v13.xml", "Yes", "failed"),  # recorded No
        ("gb300-x4-580.173.02-v13.xml", "Yes", "failed"),
        ("qx-l40s.xml", "Yes", "failed"),  # recorded N/A
        (RUBIN, "No", "passed"),  # recorded Yes
        (RUBIN, "N/A", "passed"),
    ],
)
def test_unrepairable_memory_flag(name: str, value: str, status: str) -> None:
    xml = edit(capture(name), "ecc_errors/unrepairable_memory", value)
    assert verdicts(node_for(xml))["gpu.retired_pages"] == status


def test_kmd_version_names_the_driver_where_driver_version_is_deprecated() -> None:
    # Driver 615 prints both and marks <driver_version> deprecated in favour of <kmd_version>.
    xml = capture(RUBIN).replace("<driver_version>615.23</driver_version>", "")
    assert nvsmi.parse_xml(xml).driver_version == "615.23"


# ---------------------------------------------------------------- PCIe
def test_narrow_link_fails_unless_the_class_declares_a_narrower_slot() -> None:
    xml = capture("tesla-t4.xml")  # a cloud T4 at x8 of x16
    [link] = [c for c in run_catalogue(node_for(xml)) if c.id == "gpu.pcie_link"]
    assert link.status == "failed"
    assert link.message.startswith("GPU 0 (00000000:00:1E.0): width x8 < the GPU's x16 (missing lanes")
    assert verdicts(node_for(xml, pcie_width=16))["gpu.pcie_link"] == "failed"
    assert verdicts(node_for(xml, pcie_width=8))["gpu.pcie_link"] == "passed"
    full = edit(xml, "pci/pci_gpu_link_info/link_widths/current_link_width", "16x")
    assert verdicts(node_for(full))["gpu.pcie_link"] == "passed"


def test_host_limited_generation() -> None:
    xml = capture("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml")  # gen5 GPU, host max gen 4, idle at gen 1
    [link] = [c for c in run_catalogue(node_for(xml)) if c.id == "gpu.pcie_link"]
    assert link.status == "passed" and "host max gen 4" in link.message
    assert verdicts(node_for(xml, pcie_gen=4))["gpu.pcie_link"] == "passed"  # idle gen 1 is not judged
    assert verdicts(node_for(xml, pcie_gen=5))["gpu.pcie_link"] == "failed"


def test_a_link_trained_down_under_load_fails() -> None:
    # The V100S capture was recorded at 97 % utilisation, gen 3 of gen 3. No public capture of a link trained
    # down under load was found: one field edit, current_link_gen 3 -> 1.
    xml = edit(capture("v100s-pcie-32gb-x8-460.73.01-v11.xml"), "pci/pci_gpu_link_info/pcie_gen/current_link_gen", "1")
    status, message = one(node_for(xml), "gpu.pcie_link")
    assert status == "failed"
    assert "link at gen 1 of its gen 3 while the GPU is 97 % busy" in message


def test_idle_down_training_stays_normal_and_the_same_link_busy_fails() -> None:
    # The RTX 3060 capture, as recorded: idle (0 %), its link at gen 1 of gen 4 (power saving).
    xml = capture("rtx-3060-v12.xml")
    assert one(node_for(xml), "gpu.pcie_link")[0] == "passed"
    # One field edit, gpu_util 0 % -> 100 %: the same link, now under load, is a fault.
    status, message = one(node_for(edit(xml, "utilization/gpu_util", "100 %")), "gpu.pcie_link")
    assert status == "failed" and "gen 1 of its gen 4 while the GPU is 100 % busy" in message


@pytest.mark.parametrize(
    ("value", "status"),
    [
        # DCGM's DCGM_LIMIT_MAX_PCIREPLAY_RATE, 8 per minute: over 85 minutes 680 is 8.0/min, 681 is 8.01/min.
        ("680", "passed"),
        ("681", "failed"),
        ("0", "passed"),
    ],
)
def test_pcie_replay_rate_over_the_uptime(value: str, status: str) -> None:
    xml = edit(capture("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml"), "pci/replay_counter", value)
    got, message = one(node_for(xml, answers=UPTIME_85_MIN), "gpu.pcie_replay")
    assert got == status, message
    if status == "failed":
        assert message.startswith("GPU 0 (") and "681 PCIe replays in 85 min = 8.01/min > 8/min" in message


HGX_H100 = "hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml"


def test_recorded_h100_replays_judged_over_the_uptime() -> None:
    answers = {checks.UPTIME_COMMAND: "5100.00 10000.00\n"}  # 150 replays in 85 minutes
    got, message = one(node_for(capture(HGX_H100), answers=answers), "gpu.pcie_replay")
    assert (got, message) == ("passed", "at most 1.76 PCIe replays/min (<= 8/min)")


def test_recorded_h100_replays_fail_when_the_link_replayed_them_within_minutes() -> None:
    answers = {checks.UPTIME_COMMAND: "1080.00 2000.00\n"}  # the same 150 replays within 18 minutes: 8.33/min
    got, message = one(node_for(capture(HGX_H100), answers=answers), "gpu.pcie_replay")
    assert got == "failed"
    assert message == "GPU 0 (00000000:53:00.0): 150 PCIe replays in 18 min = 8.33/min > 8/min"


# The NVLink Subnet Manager as Fabric Manager runs it on an HGX B300 (a public bring-up log's `systemctl status
# nvidia-fabricmanager`, CGroup line `31060 /opt/nvidia/nvlsm/sbin/nvlsm -F ... -g 0x7425540300353de9`), in the shape
# `pgrep -a` prints: PID, then the command line.
NVLSM_RUNNING = (
    "31060 /opt/nvidia/nvlsm/sbin/nvlsm -F /usr/share/nvidia/nvlsm/nvlsm.conf -B "
    "--pid_file /var/run/nvidia-fabricmanager/nvlsm.pid -g 0x7425540300353de9\n"
)


def test_fabric_registration_on_the_hgx_b200() -> None:
    answers = {checks.FABRIC_MANAGER_COMMAND: "active\n", checks.NVLSM_COMMAND: NVLSM_RUNNING}
    node = node_for(capture("hgx-b200-x8-580.105.08-v13.xml"), nvswitch=True, answers=answers)
    assert one(node, "node.fabric_manager") == ("passed", "nvidia-fabricmanager active, fabric registration complete")


def test_an_hgx_b200_without_the_nvlink_subnet_manager_has_no_fabric() -> None:
    node = node_for(
        capture("hgx-b200-x8-580.105.08-v13.xml"),
        nvswitch=True,
        answers={checks.FABRIC_MANAGER_COMMAND: "active\n", checks.NVLSM_COMMAND: ""},
    )
    got, message = one(node, "node.fabric_manager")
    assert (got, message) == (
        "failed",
        "NVLink Subnet Manager (nvlsm) is not running: an HGX Blackwell fabric needs it",
    )


def test_a_gb200_rack_tray_is_not_asked_for_the_subnet_manager() -> None:
    """GB200 NVL racks run the subnet manager on the switch trays (NMX-Controller), not on the compute node."""
    node = node_for(
        capture("gb200-x4-arm64-580.173.02-v13.xml"), nvswitch=True, answers={checks.FABRIC_MANAGER_COMMAND: "active\n"}
    )
    assert one(node, "node.fabric_manager")[0] == "passed"


def test_a_hopper_gpu_that_reports_no_fabric_state_has_not_registered() -> None:
    """One named field edit of the recorded HGX H100: fabric/state N/A. Hopper registers with the fabric, so N/A
    is no registration; the recorded Ampere A100 (k8s-test-infra qx-a100) reports N/A by design and passes."""
    xml = edit(capture(HGX_H100), "fabric/state", "N/A")
    node = node_for(xml, nvswitch=True, answers={checks.FABRIC_MANAGER_COMMAND: "active\n"})
    got, message = one(node, "node.fabric_manager")
    assert (got, message) == ("failed", "GPU 0: fabric N/A/Success")
    ampere = node_for(capture("qx-a100.xml"), nvswitch=True, answers={checks.FABRIC_MANAGER_COMMAND: "active\n"})
    assert one(ampere, "node.fabric_manager")[0] == "passed"


@pytest.mark.parametrize(
    ("path", "value", "service", "status"),
    [
        (None, None, "active\n", "passed"),
        (None, None, "inactive\n", "failed"),
        ("fabric/state", "In Progress", "active\n", "failed"),
        ("fabric/status", "Failure", "active\n", "failed"),
    ],
)
def test_fabric_registration_on_the_hgx_h100(path: str | None, value: str | None, service: str, status: str) -> None:
    xml = capture(HGX_H100) if path is None else edit(capture(HGX_H100), path, value or "")
    node = node_for(xml, nvswitch=True, answers={checks.FABRIC_MANAGER_COMMAND: service})
    got, message = one(node, "node.fabric_manager")
    assert got == status, message
    if path:
        assert f"GPU 0: fabric {value}" in message or f"/{value}" in message


def test_pcie_replays_just_after_boot_count_over_one_minute() -> None:
    xml = edit(capture("tesla-t4.xml"), "pci/replay_counter", "8")
    answers = {checks.UPTIME_COMMAND: "20.00 30.00\n"}  # 8 in 20 s: 8 in the first minute, not 24/min
    assert one(node_for(xml, answers=answers), "gpu.pcie_replay")[0] == "passed"
    xml = edit(capture("tesla-t4.xml"), "pci/replay_counter", "9")
    assert one(node_for(xml, answers=answers), "gpu.pcie_replay")[0] == "failed"


def test_pcie_replay_rate_not_applicable() -> None:
    xml = edit(capture("tesla-t4.xml"), "pci/replay_counter", "90000")
    # Replays but no uptime: the rate cannot be told, so it is not judged.
    status, message = one(node_for(xml), "gpu.pcie_replay")
    assert status == "skipped" and "uptime cannot be read" in message
    # A vGPU guest reports replay_counter N/A.
    status, message = one(node_for(capture("tesla_p4.xml")), "gpu.pcie_replay")
    assert status == "skipped" and "no GPU reports a PCIe replay counter" in message


# ---------------------------------------------------------------- evidence: what each check judged
#: Per-GPU check: the fields its evidence shows for every GPU, and one field each of the others shows.
PER_GPU_EVIDENCE = {
    "gpu.persistence": ("persistence=", "virtualization="),
    "gpu.ecc_volatile": ("ecc=", "volatile_uncorrectable=", "aggregate_uncorrectable=", "sram_threshold_exceeded="),
    "gpu.retired_pages": ("retired sbe/dbe=", "remapped pending/failure=", "repair_pending=", "unrepairable_memory="),
    "gpu.throttle": ("slowdowns=", "benign="),
    "gpu.pcie_link": ("pcie gen cur/max/gpu/host=", "width cur/max="),
    "gpu.mig": ("mig current/pending=",),
}


def test_per_gpu_evidence_shows_the_fields_each_check_judged() -> None:
    xml = capture("dual-rtx-2070-590.44.01-v13.xml")
    found = {c.id: c for c in run_catalogue(node_for(xml, mig=False)) if c.id in PER_GPU_EVIDENCE}
    assert set(found) == set(PER_GPU_EVIDENCE)
    for id, fields in PER_GPU_EVIDENCE.items():
        lines = found[id].evidence.splitlines()[1:]
        assert len(lines) == 2, id  # one line per GPU
        others = [f[0] for other, f in PER_GPU_EVIDENCE.items() if other != id]
        for line in lines:
            assert all(f in line for f in fields), (id, line)
            assert not any(f in line for f in others), (id, line)


def test_a_fault_shows_in_its_checks_evidence() -> None:
    xml = edit(capture("dual-rtx-2070-590.44.01-v13.xml"), "retired_pages/pending_retirement", "Yes", gpu=1)
    [check] = [c for c in run_catalogue(node_for(xml)) if c.id == "gpu.retired_pages"]
    gpu0, gpu1 = check.evidence.splitlines()[1:]
    assert "retired_pending=False" in gpu0 and "retired_pending=True" in gpu1


# ---------------------------------------------------------------- persistence, driver, throttle, MIG
def test_persistence_na_passes_disabled_fails() -> None:
    assert verdicts(node_for(capture("rtx-3080-v12.xml")))["gpu.persistence"] == "passed"  # recorded N/A
    assert (
        verdicts(node_for(edit(capture("rtx-3060-v12.xml"), "persistence_mode", "N/A")))["gpu.persistence"] == "passed"
    )


@pytest.mark.parametrize(
    "text", ["535.54.03", " 535.54.03 ", "535.54.03 (Requested functionality has been deprecated)", "Driver: 535.54.03"]
)
def test_driver_version_read_robustly(text: str) -> None:
    xml = capture("a100-sxm4-v12.xml").replace(
        "<driver_version>535.54.03</driver_version>", f"<driver_version>{text}</driver_version>"
    )
    assert nvsmi.parse_xml(xml).driver_version == "535.54.03"


def test_hardware_slowdown_fails_benign_reasons_pass() -> None:
    xml = capture("quadro-p2000-v12.xml")  # gpu_idle Active as recorded
    [throttle] = [c for c in run_catalogue(node_for(xml)) if c.id == "gpu.throttle"]
    assert throttle.status == "passed" and "gpu_idle" in throttle.message
    hot = edit(xml, "clocks_throttle_reasons/clocks_throttle_reason_hw_thermal_slowdown", "Active")
    assert verdicts(node_for(hot))["gpu.throttle"] == "failed"


def test_mig_against_the_node_class() -> None:
    xml = capture("a100-sxm4-v12.xml")  # recorded with MIG Enabled
    assert verdicts(node_for(xml, mig=True))["gpu.mig"] == "passed"
    assert verdicts(node_for(xml, mig=False))["gpu.mig"] == "failed"
    assert verdicts(node_for(edit(xml, "mig_mode/pending_mig", "Disabled"), mig=True))["gpu.mig"] == "failed"


def test_nvlink_in_mig_mode_is_not_zero_links_up() -> None:
    node = node_for(capture("a100-sxm4-v12.xml"), nvlink_links_per_gpu=12)
    [nvlink] = [c for c in run_catalogue(node) if c.id == "topology.nvlink"]
    assert nvlink.status == "skipped" and "MIG mode" in nvlink.message


def test_nvlink_inactive_links_from_a_real_v100() -> None:
    text = (FIXTURES / "nvlink" / "v100-nvlink-s-inactive-azhpc-diagnostics-73.txt").read_text()
    links = nvsmi.parse_nvlink_status(text)
    assert links == {3: {0: True, 1: True, 2: True, 3: False, 4: True, 5: False}}
    h100 = nvsmi.parse_nvlink_status((FIXTURES / "nvlink" / "h100-nvlink-s-bottlerocket-4418.txt").read_text())
    assert sum(h100[0].values()) == 18


# ---------------------------------------------------------------- Xid
def kernel_log(name: str) -> str:
    return (FIXTURES / "kernel-log" / name).read_text()


def test_application_xids_do_not_fail() -> None:
    node = node_for(capture("rtx-3060-v12.xml"), dmesg=kernel_log("xid-13-pastebin-gn6mYmM4.log"))
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "passed" and "3 application Xid(s)" in check.message


def test_driver_xids_fail_with_the_driver_remedy() -> None:
    # 32, 69 and 62 at 179-270 s after boot; the node has been up 5100 s: inside the default 24 h window.
    node = node_for(capture("rtx-3060-v12.xml"), dmesg=kernel_log("xid-32-69-62-gist-kohsuke.log"))
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "failed"
    assert check.message.startswith("driver Xid in the last 24 h")
    # The catalog: 32 and 69 RESTART_APP (the application's), 62 RESET_GPU.
    assert check.message == "driver Xid in the last 24 h: 62 (Internal micro-controller halt (newer drivers))"
    assert check.remedy.startswith("Xid 62: RESET_GPU: reset the GPU")
    assert "driver: drain the node and reset the GPU" in check.remedy


def test_xid_outside_the_window_is_reported_not_failed() -> None:
    node = node_for(capture("rtx-3060-v12.xml"), dmesg=kernel_log("xid-32-69-62-gist-kohsuke.log"))
    node.settings = node.settings.model_copy(update={"node_checks": NodeChecks(xid_window_hours=1)})  # 4830+ s ago
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "passed" and "4 older" in check.message


def test_xid_63_is_what_the_catalog_says_ignore_and_the_pending_remap_is_judged_by_retired_pages() -> None:
    # NVIDIA's catalog: Xid 63 (INFOROM_DRAM_RETIREMENT_EVENT) immediate IGNORE, investigatory IGNORE. The
    # remapping it announces waits for a reset, which gpu.retired_pages fails on (remapped_row_pending Yes).
    node = node_for(capture("a100-sxm4-v12.xml"), dmesg=kernel_log("xid-63-ml-engineering.log"))
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "passed" and "IGNORE: no action" in check.evidence
    # (test_row_remapping_pending_or_failed fails gpu.retired_pages on remapped_row_pending Yes.)


def test_xid_without_timestamp_counts_as_recent_and_names_nvidias_action() -> None:
    # Xid 62 of the gist's log without its dmesg stamp: its age cannot be told, so it is in the window.
    line = kernel_log("xid-32-69-62-gist-kohsuke.log").splitlines()[-1]
    assert ": 62, " in line
    unstamped = line[line.index("NVRM: Xid") :]
    node = node_for(capture("rtx-3060-v12.xml"), dmesg=unstamped + "\n")
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "failed" and check.message.startswith("driver Xid")
    assert "Xid 62: RESET_GPU: reset the GPU (nvidia-smi -r)" in check.remedy
    assert "if it recurs: CONTACT_SUPPORT" in check.remedy


# NVIDIA's catalog quotes Xid 154's text: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot
# Required)"; the kernel prints it after "NVRM: Xid (PCI:<bus id>): 154, " like every Xid.
XID_154 = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x{n} ({action})\n"


@pytest.mark.parametrize(
    ("n", "action", "status", "kind"),
    [
        (2, "Node Reboot Required", "failed", "hardware"),
        (1, "GPU Reset Required", "failed", "driver"),
        (0, "None", "passed", "application"),
    ],
)
def test_xid_154_is_judged_by_the_recovery_action_it_names(n: int, action: str, status: str, kind: str) -> None:
    node = node_for(capture("rtx-3060-v12.xml"), dmesg=XID_154.format(n=n, action=action))
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == status and f"[{kind}] Xid 154" in check.evidence
    if status == "failed":
        assert f"Xid 154: recovery action now {action}" in check.remedy


def test_xid_45_follows_the_other_xids_and_alone_needs_fabric_manager() -> None:
    # The catalog's WORKFLOW_XID_45: with other Xids it follows theirs; solo, RESTART_FM.
    log = kernel_log("xid-13-pastebin-gn6mYmM4.log")
    line45 = "NVRM: Xid (PCI:0000:01:00): 45, pid=1234, Ch 00000010\n"
    with_13 = node_for(capture("rtx-3060-v12.xml"), dmesg=log + line45)
    assert one(with_13, "gpu.xid")[0] == "passed"
    solo = node_for(capture("rtx-3060-v12.xml"), dmesg=line45)
    [check] = [c for c in run_catalogue(solo) if c.id == "gpu.xid"]
    assert check.status == "failed" and "restart Fabric Manager" in check.remedy


def test_nvlink5_xids_follow_the_decode_sheets_row_for_their_sub_code() -> None:
    # A GB200 node's Xid 149 NETIR_LINK_EVT (intrInfo[25:20] 100001: the peer took the link down) and the Xid 154s
    # after it: the decode sheet says RESET_GPU (driver), not the hardware class of WORKFLOW_NVLINK5_ERR.
    node = node_for(
        capture("gb200-x4-arm64-580.173.02-v13.xml"), dmesg=kernel_log("xid-149-154-gb200-gpud-kmsg-test.log")
    )
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "failed" and check.message.startswith("driver Xid in the last 24 h")
    assert check.remedy.startswith(
        "Xid 149: NETIR_LINK_EVT/NETIR_LINK_DOWN 100001 (Link Fatal): RESET_GPU: reset the GPU (nvidia-smi -r) when "
        "its processes have stopped; if it recurs: INVESTIGATE_PEER_DEVICE; "
    )
    assert check.remedy.count("Xid 149:") == 1  # one line per sub-code, not per link
    assert "Xid 154: recovery action now GPU Reset Required" in check.remedy
    assert "hardware" not in check.message


def test_a_non_fatal_nvlink5_sub_code_needs_nothing() -> None:
    # RLW_RXPIPE with error status 0x8: the decode sheet's IGNORE, so the node passes.
    rxpipe = kernel_log("xid-145-149-gpud-pr-1174.log").splitlines()[2]
    node = node_for(capture("gb200-x4-arm64-580.173.02-v13.xml"), dmesg=rxpipe + "\n")
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.xid"]
    assert check.status == "passed" and "RLW_RXPIPE (Non-fatal): IGNORE: no action" in check.evidence
    # The NETIR interrupt and the peer's link-down of the same recording ask for a GPU reset.
    whole = node_for(capture("gb200-x4-arm64-580.173.02-v13.xml"), dmesg=kernel_log("xid-145-149-gpud-pr-1174.log"))
    [check] = [c for c in run_catalogue(whole) if c.id == "gpu.xid"]
    assert check.status == "failed" and check.message.startswith("driver Xid")
    assert "NETIR/NETIR_INT (Link Fatal): RESET_GPU" in check.remedy
    assert "NETIR_LINK_EVT/NETIR_LINK_DOWN 100101 (Link Fatal): RESET_GPU" in check.remedy


def test_xid_154_eval_takes_the_action_of_the_same_gpus_xid_154() -> None:
    # The decode sheet's XID_154_EVAL (RLW_REMAP, V2, status 0x1): an Xid 154 of that GPU decides, else restart the
    # application. The Xid 154 is the GB200 recording's, on another GPU (0018:01:00), then with its bus id edited to
    # the RLW_REMAP line's (0000:04:00): one field edit.
    remap = kernel_log("xid-145-rlw-remap-gpud-nvlink-logs-test.log")
    alone = node_for(capture("gb200-x4-arm64-580.173.02-v13.xml"), dmesg=remap)
    assert one(alone, "gpu.xid")[0] == "passed"
    xid_154 = kernel_log("xid-149-154-gb200-gpud-kmsg-test.log").splitlines()[7] + "\n"
    assert "(PCI:0018:01:00): 154" in xid_154
    other_gpu = node_for(capture("gb200-x4-arm64-580.173.02-v13.xml"), dmesg=remap + xid_154)
    [check] = [c for c in run_catalogue(other_gpu) if c.id == "gpu.xid"]
    assert "[application] Xid 145" in check.evidence and "[driver] Xid 154" in check.evidence
    same_gpu = node_for(
        capture("gb200-x4-arm64-580.173.02-v13.xml"), dmesg=remap + xid_154.replace("0018:01:00", "0000:04:00")
    )
    [check] = [c for c in run_catalogue(same_gpu) if c.id == "gpu.xid"]
    assert check.status == "failed" and "[driver] Xid 145" in check.evidence
    assert "RLW_REMAP (Non-fatal): XID_154_EVAL" in check.remedy


# ---------------------------------------------------------------- GPU recovery action
@pytest.mark.parametrize(
    ("value", "remedy"),
    [
        ("Reset", "reset it (nvidia-smi -r -i <index>)"),
        ("Node Reboot Required", "drain the node and reboot it"),
        ("Drain P2P", "let the running jobs drain"),
        ("Drain and Reset", "then reset the GPU"),
    ],
)
def test_recovery_action_fails_with_its_remedy(value: str, remedy: str) -> None:
    # One field edit of a real 570 capture (recorded None): gpu_recovery_action.
    node = node_for(edit(capture("qx-a100.xml"), "gpu_recovery_action", value))
    [check] = [c for c in run_catalogue(node) if c.id == "gpu.recovery_action"]
    assert check.status == "failed" and f"recovery action {value}" in check.message
    assert remedy in check.remedy and check.remedy.startswith(value)


def test_gpu_requires_reset_fails_where_the_driver_reports_it() -> None:
    # qx-a100 (570) prints deprecated text in reset_required; one field edit to the older drivers' Yes.
    node = node_for(edit(capture("qx-a100.xml"), "gpu_reset_status/reset_required", "Yes"))
    assert one(node, "gpu.recovery_action") == (
        "failed",
        "GPU 0 (00000000:06:00.0): recovery action GPU requires reset",
    )


# ---------------------------------------------------------------- one failure per root cause
def test_nouveau_is_reported_once() -> None:
    nc = NodeClass(gpu_model="Tesla V100-SXM2-32GB", gpu_count=4, nvlink_links_per_gpu=6)
    settings = Settings(node_classes={"c": nc}, driver={"branch": "535"}, container_runtime="none")
    smi = Answer("nvidia-smi -q -x", 9, replay.SMI_DRIVER_FAILURE, "")
    node = Node.recorded(
        "n", nc, settings, {checks.MODULES_COMMAND: replay.LSMOD_NOUVEAU, "nvidia-smi -q -x": smi, **BARE}
    )
    results = run_catalogue(node)
    assert [c.id for c in results if c.status == "failed"] == ["driver.nouveau_absent"]
    dependent = [c for c in results if c.message.startswith("depends on ")]
    assert {c.message for c in dependent} == {"depends on driver.nouveau_absent (nouveau is loaded)"}
    assert {c.id for c in dependent} >= {
        "driver.nvidia_module",
        "driver.nvidia_smi",
        "gpu.count",
        "gpu.xid",
        "node.devices",
        "topology.nvlink",
    }


def test_dependencies_are_declared_before_use() -> None:
    seen: set[str] = set()
    for definition in checks.CATALOGUE:
        assert set(definition.depends) <= seen, definition.id
        seen.add(definition.id)
    gpu_checks = [d for d in checks.CATALOGUE if re.match(r"(gpu|topology|compute|diag|perf)\.", d.id)]
    assert all(d.depends for d in gpu_checks)


# ---------------------------------------------------------------- depth checks, each with the tool present
def one(node: Node, id: str) -> tuple[str, str]:
    [check] = [c for c in run_catalogue(node) if c.id == id]
    return check.status, check.message


def test_gpu_fallen_off_the_bus() -> None:
    xml = capture("tesla-t4.xml")  # bus 00000000:00:1E.0
    seen = {checks.LSPCI_COMMAND: "00:1e.0 0302: 10de:1eb8 (rev a1)\n"}
    assert one(node_for(xml, answers=seen), "gpu.pci_bus")[0] == "passed"
    lost = {checks.LSPCI_COMMAND: "00:1e.0 0302: 10de:1eb8 (rev a1)\n00:1f.0 0302: 10de:1eb8 (rev a1)\n"}
    status, message = one(node_for(xml, answers=lost), "gpu.pci_bus")
    assert status == "failed" and "not seen: 00:1f.0" in message


def test_fabric_manager_on_nvswitch_classes() -> None:
    xml = capture("a100-sxm4-v12.xml")  # <fabric><state>N/A: an A100 reports no fabric registration
    assert one(node_for(xml), "node.fabric_manager")[0] == "skipped"
    active = {checks.FABRIC_MANAGER_COMMAND: "active\n"}
    assert one(node_for(xml, answers=active, nvswitch=True), "node.fabric_manager")[0] == "passed"
    stopped = {checks.FABRIC_MANAGER_COMMAND: "inactive\n"}
    assert one(node_for(xml, answers=stopped, nvswitch=True), "node.fabric_manager") == (
        "failed",
        "nvidia-fabricmanager is inactive",
    )
    unregistered = edit(xml, "fabric/state", "In Progress")
    assert one(node_for(unregistered, answers=active, nvswitch=True), "node.fabric_manager")[0] == "failed"


def test_peermem_ib_rate_and_flapping() -> None:
    xml = capture("a100-sxm4-v12.xml")
    fabric = {"type": "infiniband", "ports": ["mlx5_0"], "rate_gbps": 200, "gpudirect_rdma": True}
    ib = {"ibstat mlx5_0": replay.ibstat(replay.PROFILES["v100-x4"])}  # 100 Gb/s
    node = node_for(xml, answers=ib, dmesg="", fabric=fabric)
    assert one(node, "node.peermem") == ("failed", "nvidia_peermem is not loaded: GPUDirect RDMA is off")
    assert one(node, "node.ib_ports") == (
        "failed",
        "ports not as expected: mlx5_0 port 1: rate 100 Gb/s < node class 200",
    )
    assert one(node, "node.ib_flapping")[0] == "passed"
    flapping = "[ 4000.123456] mlx5_core 0000:3b:00.0 mlx5_0: Port 1 link down\n"
    assert one(node_for(xml, answers=ib, dmesg=flapping, fabric=fabric), "node.ib_flapping")[0] == "failed"
    loaded = {checks.MODULES_COMMAND: replay.LSMOD_NVIDIA + "nvidia_peermem         16384  0\n"}
    assert one(node_for(xml, answers=loaded, fabric=fabric), "node.peermem")[0] == "passed"


def test_nvlink_error_counters_fail_over_the_limit() -> None:
    xml = capture("rtx-3090-v12.xml")
    text = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: x)\n\t Link 0: Replay Errors: 0\n\t Link 0: CRC Errors: 4096\n"
    status, message = one(
        node_for(xml, answers={"nvidia-smi nvlink -e": text}, nvlink_links_per_gpu=4), "topology.nvlink_errors"
    )
    assert status == "failed" and "GPU 0 link 0: CRC Errors=4096" in message


DCGM_DIAG = FIXTURES / "dcgm" / "dcgmi-diag-r1-json-3.1.0-x8-jsonresulttests.txt"


def test_real_dcgm_diag_json_passes_as_it_says() -> None:
    # DCGM 3.1.0 on 8 GPUs, every result PASS, after a line of text and with null entries between tests.
    text = DCGM_DIAG.read_text()
    results = nvsmi.parse_dcgm_diag(text)
    assert len(results) == 17 and {status for _, status in results} == {"PASS"}
    assert ("Page Retirement/Row Remap", "PASS") in results
    xml = capture("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml")
    assert one(node_for(xml, answers={checks.DCGM_COMMAND: text}), "diag.dcgm") == (
        "passed",
        "dcgmi diag -r 1: 17 result(s), none failed",
    )


def dcgm_edit(path: list[str | int], value: object) -> str:
    """One named field edit of the real dcgmi diag JSON (the text before its first brace kept)."""
    import json

    text = DCGM_DIAG.read_text()
    head, data = text[: text.index("{")], json.loads(text[text.index("{") :])
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return head + json.dumps(data, indent=1)


def test_real_dcgm_diag_json_with_one_failing_result() -> None:
    tests = ["DCGM GPU Diagnostic", "test_categories", 0, "tests"]
    text = dcgm_edit([*tests, 12, "results", 0, "status"], "FAIL")  # Page Retirement/Row Remap
    xml = capture("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml")
    assert one(node_for(xml, answers={checks.DCGM_COMMAND: text}), "diag.dcgm") == (
        "failed",
        "dcgmi diag -r 1 failed: Page Retirement/Row Remap: FAIL",
    )


def test_dcgm_runtime_error_is_not_a_pass() -> None:
    # DCGM's JSON carries runtime_error when the diagnostic could not run (NVIDIA/DCGM JsonResult.hpp).
    text = dcgm_edit(["DCGM GPU Diagnostic", "runtime_error"], "Couldn't find the GPU in the system")
    xml = capture("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml")
    status, message = one(node_for(xml, answers={checks.DCGM_COMMAND: text}), "diag.dcgm")
    assert status == "failed" and "runtime_error (Couldn't find the GPU in the system): FAIL" in message
    nothing = '{"DCGM GPU Diagnostic": {"version": "3.1.0"}}'
    status, message = one(node_for(xml, answers={checks.DCGM_COMMAND: nothing}), "diag.dcgm")
    assert (status, message) == ("failed", "dcgmi diag answered no test result (exit 0)")


def test_dcgm_and_bandwidth_when_the_tools_are_there() -> None:
    xml = capture("rtx-pro-6000-blackwell-maxq-590.44.01-v13.xml")  # link max gen 4 x16
    failing = '{"DCGM GPU Diagnostic": {"tests": [{"name": "PCIe", "results": [{"status": "Fail"}]}]}}'
    assert one(node_for(xml, answers={checks.DCGM_COMMAND: failing}), "diag.dcgm") == (
        "failed",
        "dcgmi diag -r 1 failed: PCIe: Fail",
    )
    nccl = "#  Avg bus bandwidth    : 21.3 \n"
    two = capture("dual-rtx-2070-590.44.01-v13.xml")
    status, message = one(node_for(two, answers={checks.NCCL_COMMAND: nccl}), "perf.nccl_allreduce")
    assert status == "passed" and "recorded, not judged" in message
    one_gpu = "#  Avg bus bandwidth    : 0 \n"  # what all_reduce_perf -g 1 reports
    assert one(node_for(xml, answers={checks.NCCL_COMMAND: one_gpu}), "perf.nccl_allreduce") == (
        "skipped",
        "one GPU: no all-reduce within the node",
    )


def test_a_gpu_asking_for_recovery_is_a_metric_labelled_with_its_action() -> None:
    from gpuready.core.report import metrics as metrics_file
    from gpuready.core.results import RunResult
    from gpuready.validate import gpu_node

    node = node_for(edit(capture("qx-a100.xml"), "gpu_recovery_action", "Reset"))
    run = RunResult(command="validate gpu-node")
    results = run_catalogue(node)
    run.add(*results)
    gpu_node.record_figures(run, results, lambda host: node.node_class)
    text = metrics_file.render(run)
    series = [line for line in text.splitlines() if line.startswith("gpuready_gpu_recovery_action_required_gpus{")]
    assert len(series) == 1
    assert 'action="Reset"' in series[0] and 'gpu="0"' in series[0] and series[0].endswith(" 1")
    healthy = RunResult(command="validate gpu-node")
    gpu_node.record_figures(healthy, run_catalogue(node_for(capture("qx-a100.xml"))), lambda host: node.node_class)
    assert "recovery_action" not in metrics_file.render(healthy)


# ---------------------------------------------------------------- GB200/GB300: NVLink 5, IMEX, the rack's fabric
GB200_NVLINK = (FIXTURES / "nvlink" / "gb200-nvlink-s-k8s-test-infra-371.txt").read_text()
IMEX_UP = "service: active\n" + (FIXTURES / "imex" / "nvidia-imex-ctl-N-p6e-gb200x72-18-nodes-570.172.txt").read_text()


def test_gb200_has_its_18_nvlink5_links_at_53_125_gb_s() -> None:
    node = node_for(
        capture("gb200-x4-arm64-580.173.02-v13.xml"),
        nvlink_links_per_gpu=18,
        answers={"nvidia-smi nvlink -s": GB200_NVLINK},
    )
    assert one(node, "topology.nvlink") == ("passed", "18 links up on each GPU at 53.125 GB/s")


def test_a_gb200_link_below_nvlink5_speed_fails() -> None:
    # One edit of the recorded listing: link 7's speed, as an NVLink 4 link reads it (26.562 GB/s, the H100 capture).
    slow = GB200_NVLINK.replace("Link 7: 53.125 GB/s", "Link 7: 26.562 GB/s")
    node = node_for(
        capture("gb200-x4-arm64-580.173.02-v13.xml"), nvlink_links_per_gpu=18, answers={"nvidia-smi nvlink -s": slow}
    )
    assert one(node, "topology.nvlink") == ("failed", "GPU 0: link(s) below 53.125 GB/s: 7 at 26.562 GB/s")


def test_h100_links_are_judged_against_the_nodes_fastest() -> None:
    h100 = (FIXTURES / "nvlink" / "h100-nvlink-s-bottlerocket-4418.txt").read_text()
    node = node_for(
        capture("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml"),
        nvlink_links_per_gpu=18,
        answers={"nvidia-smi nvlink -s": h100},
    )
    assert one(node, "topology.nvlink") == ("passed", "18 links up on each GPU at 26.562 GB/s")


@pytest.mark.parametrize("name", ["gb200-x4-arm64-580.173.02-v13.xml", "gb300-x4-580.173.02-v13.xml"])
def test_nvlink_domain_up_with_the_recorded_imex_domain(name: str) -> None:
    node = node_for(capture(name), nvlink_domain=True, answers={checks.IMEX_COMMAND: IMEX_UP})
    status, message = one(node, "topology.nvlink_domain")
    clique = nvsmi.parse_xml(capture(name)).gpus[0].fabric_clique
    assert status == "passed" and message.startswith("IMEX domain UP (18 nodes READY), fabric cluster ")
    assert message.endswith(f"clique {clique} on 1 GPUs")


@pytest.mark.parametrize(
    ("imex", "edit_path", "value", "problem"),
    [
        ("service: inactive\n", "", "", "nvidia-imex is inactive"),
        ("service: \nsh: 1: nvidia-imex-ctl: not found\n", "", "", "nvidia-imex is not installed"),
        # One edit of the recorded domain status each: the domain state, one node's status.
        (IMEX_UP.replace("Domain State: UP", "Domain State: DOWN"), "", "", "IMEX domain DOWN"),
        (IMEX_UP.replace("172.31.50.44    - READY", "172.31.50.44    - UNAVAILABLE"), "", "", "IMEX node 5"),
        # One edit of the GB200 capture each: the fabric state, the health summary.
        (IMEX_UP, "fabric/state", "In Progress", "GPU 0: fabric In Progress/Success"),
        (IMEX_UP, "fabric/health/summary", "Unhealthy", "GPU 0: fabric health Unhealthy (bandwidth Full)"),
    ],
)
def test_nvlink_domain_faults(imex: str, edit_path: str, value: str, problem: str) -> None:
    xml = capture("gb200-x4-arm64-580.173.02-v13.xml")
    node = node_for(
        edit(xml, edit_path, value) if edit_path else xml, nvlink_domain=True, answers={checks.IMEX_COMMAND: imex}
    )
    status, message = one(node, "topology.nvlink_domain")
    assert status == "failed" and problem in message


def test_nvlink_domain_is_skipped_off_a_domain_class() -> None:
    assert one(node_for(capture("gb200-x4-arm64-580.173.02-v13.xml")), "topology.nvlink_domain")[0] == "skipped"


def test_a_node_in_another_clique_than_its_rack_fails() -> None:
    from gpuready.validate.node.checks import topology

    xml = capture("gb200-x4-arm64-580.173.02-v13.xml")
    # Three nodes of one rack as recorded (clique 2), one with one edit: its GPU reports clique 3.
    xmls = {"gb-1": xml, "gb-2": xml, "gb-3": xml, "gb-4": edit(xml, "fabric/cliqueId", "3")}
    results = [
        c
        for host, text in xmls.items()
        for c in run_catalogue(node_for(text, name=host, nvlink_domain=True, answers={checks.IMEX_COMMAND: IMEX_UP}))
        if c.id == "topology.nvlink_domain"
    ]
    topology.across_domains(results, dict.fromkeys(xmls, "rack-a"))
    got = {c.host: c.status for c in results}
    assert got == {"gb-1": "passed", "gb-2": "passed", "gb-3": "passed", "gb-4": "failed"}
    [odd] = [c for c in results if c.host == "gb-4"]
    assert (
        "rack rack-a: this node reports fabric cluster" in odd.message and "clique 3, 3 of the rack's 4" in odd.message
    )
    # Undeclared racks are not compared.
    fresh = [c for c in results if c.host != "gb-4"]
    topology.across_domains(fresh, {})
    assert {c.status for c in fresh} == {"passed"}
