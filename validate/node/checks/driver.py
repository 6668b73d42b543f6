"""The NVIDIA driver: nouveau out of the way, the module loaded, nvidia-smi answering, the pinned version."""

from __future__ import annotations

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Node


@check(
    "driver.nouveau_absent",
    "the nouveau module is not loaded (lsmod)",
    "Blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf), rebuild the initramfs and reboot.",
)
def nouveau_absent(node: Node, v: Verdict) -> Check:
    answer = node.modules
    if "nouveau" in nvsmi.parse_lsmod(answer.stdout):
        return v.failed("nouveau is loaded: it holds the GPUs the nvidia driver needs", answer.evidence(600))
    return v.passed("nouveau not loaded")


@check(
    "driver.nvidia_module",
    "the nvidia kernel module is loaded (lsmod)",
    "Install the driver (gpuready provision cluster) and load it: modprobe nvidia; check dmesg for NVRM errors.",
    depends=("driver.nouveau_absent",),
)
def nvidia_module(node: Node, v: Verdict) -> Check:
    answer = node.modules
    if "nvidia" in nvsmi.parse_lsmod(answer.stdout):
        return v.passed("nvidia module loaded", answer.evidence(300))
    return v.failed("the nvidia kernel module is not loaded", answer.evidence(600))


@check(
    "driver.nvidia_smi",
    "nvidia-smi answers (nvidia-smi -q -x exits 0)",
    "Run nvidia-smi on the node: a driver/library version mismatch needs a reboot; a missing driver, an install.",
    depends=("driver.nvidia_module",),
)
def nvidia_smi(node: Node, v: Verdict) -> Check:
    answer = node.smi_xml
    if answer.ok:
        return v.passed(f"nvidia-smi answers ({len(node.smi.gpus)} GPUs)")
    if answer.rc == 127:
        return v.failed("nvidia-smi not found: no NVIDIA driver installed", answer.evidence())
    return v.failed(f"nvidia-smi failed (exit {answer.rc})", answer.evidence())


GPU_VIEW = ("driver.nvidia_smi",)


@check(
    "driver.version",
    "the driver version equals gpuready.driver.version (or its branch)",
    "Provision the pinned driver: gpuready provision cluster (reboot if the old module is still loaded).",
    depends=GPU_VIEW,
)
def driver_version(node: Node, v: Verdict) -> Check:
    pin = node.settings.driver
    version = node.smi.driver_version
    source = "nvidia-smi -q -x"
    if not version and node.query.ok:  # some drivers leave the XML field out; the query form still has it
        rows = node.gpus_csv()
        version, source = (nvsmi.driver_version(rows[0]["driver_version"]) if rows else ""), "--query-gpu"
    evidence = (
        f"driver_version={version or '(not reported)'} ({source}); pinned version={pin.version!r} branch={pin.branch}"
    )
    if not version:
        return v.skipped("nvidia-smi does not report the driver version here", evidence)
    branch = pin.branch.split("-")[0]
    if pin.version:
        ok, want = version == pin.version, pin.version
    else:
        ok, want = version.split(".")[0] == branch, f"branch {branch}"
    if ok:
        return v.passed(f"driver {version}", evidence)
    return v.failed(f"driver {version} is installed, the inventory pins {want}", evidence)
