"""validate gpu-node over real SSH against namespace hosts replaying recorded GPU profiles.

Every check's status on every host is asserted: healthy profiles pass (or skip where the check
does not apply to their node class), each faulty profile fails exactly the checks its fault touches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuready.lab.replay import PROFILES
from gpuready.validate.node.checks import CATALOGUE, CHECK_IDS
from tests.conftest import ModuleTmp, gpuready
from tests.integration.node.conftest import accepted, start

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: Not on these hosts: a container runtime, Kubernetes, DCGM, nccl-tests, torch (so no probe), nvbandwidth
#: (but on the profiles that replay it); no class asks for MIG, GPUDirect RDMA or NVSwitch.
NOT_HERE = dict.fromkeys(
    [
        "node.container_runtime",
        "node.device_plugin_socket",
        "diag.dcgm",
        "perf.matmul_tflops",
        "perf.memory_bandwidth",
        "perf.h2d_bandwidth",
        "perf.d2h_bandwidth",
        "perf.p2p_bandwidth",
        "perf.nccl_allreduce",
        "gpu.mig",
        "node.peermem",
        "node.fabric_manager",
        # The lab replays a 535 driver's XML (no gpu_recovery_action before 550) and has no GB200 rack.
        "gpu.recovery_action",
        "topology.nvlink_domain",
    ],
    "skipped",
)
#: The checks each node class skips on a healthy replayed host: SELinux is disabled there (a profile may enforce
#: it), only the RoCE class asks for ATS, the HGX class has no fabric ports.
BY_CLASS = {
    "c4140-v100": dict.fromkeys(("node.selinux_labels", "node.ats"), "skipped"),
    "r750xa-a100": dict.fromkeys(("node.selinux_labels",), "skipped"),
    "hgx-h100": dict.fromkeys(("node.selinux_labels", "node.ib_ports", "node.ib_flapping", "node.ats"), "skipped"),
}
#: Everything that needs the nvidia driver: skipped ("depends on ...") when the driver is not there.
NEEDS_DRIVER = [c.id for c in CATALOGUE if c.depends]
#: The profiles whose hosts replay nvbandwidth's host copies (8 GPUs, no peer-to-peer section recorded).
NVBANDWIDTH = {"perf.h2d_bandwidth": "passed", "perf.d2h_bandwidth": "passed"}
FAULTS: dict[str, dict[str, str]] = {
    "v100-x4": {"node.selinux_labels": "passed"},
    "a100-x4": {},
    "h100-x8": NVBANDWIDTH,
    # GPU 5's host-to-device figure halved: that check fails, the copies the other way still pass.
    "slow-gpu": {**NVBANDWIDTH, "perf.h2d_bandwidth": "failed"},
    # A process on GPU 2: no measured check passes.
    "busy-gpu": {"perf.h2d_bandwidth": "failed", "perf.d2h_bandwidth": "failed"},
    # The driver and DCGM only: DCGM measures the host copies and the GEMM rate; its recording failed the latter.
    "dcgm-only": {
        "node.selinux_labels": "passed",
        "diag.dcgm": "passed",
        "perf.h2d_bandwidth": "passed",
        "perf.d2h_bandwidth": "passed",
        "perf.matmul_tflops": "failed",
    },
    "ecc-errors": {"gpu.ecc_volatile": "failed", "gpu.xid": "failed"},
    "driver-mismatch": {"driver.version": "failed"},
    # GPU 3 is on the PCI bus but nvidia-smi does not see it: reported once, by gpu.pci_bus; the count and
    # the pairs it was in say "depends on gpu.pci_bus".
    "missing-gpu": {
        "gpu.pci_bus": "failed",
        "gpu.count": "skipped",
        "topology.p2p": "skipped",
        "topology.nvlink": "skipped",
    },
    # One root cause, reported once: everything that needs the driver says "depends on driver.nouveau_absent".
    "nouveau": {"driver.nouveau_absent": "failed", **dict.fromkeys(NEEDS_DRIVER, "skipped")},
    "nvlink-down": {"topology.nvlink": "failed"},
    "selinux-label": {"node.selinux_labels": "failed"},
    "throttle": {"gpu.throttle": "failed"},
}


def expected(profile: str) -> dict[str, str]:
    statuses = dict.fromkeys(CHECK_IDS, "passed")
    statuses.update(NOT_HERE)
    statuses.update(BY_CLASS[PROFILES[profile].node_class])
    if profile == "nouveau":
        statuses.update({k: v for k, v in FAULTS[profile].items() if statuses[k] != "skipped" or v == "failed"})
    else:
        statuses.update(FAULTS[profile])
    return statuses


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    assert set(FAULTS) == set(PROFILES), "every profile needs its expected statuses"
    yield from start(module_tmp("nodes"), list(PROFILES), unreachable=True)


def run(lab: dict[str, Any], artifacts: Path, *args: str) -> tuple[Any, dict[str, Any]]:
    done = gpuready("validate", "gpu-node", "-i", str(lab["inventory"]), "--artifacts", str(artifacts), *args)
    assert "Traceback" not in done.stderr + done.stdout
    summary = json.loads(next(artifacts.glob("*/summary.json")).read_text())
    return done, summary


def test_every_check_on_every_host(lab: dict[str, Any], artifacts: Path) -> None:
    before = accepted(lab["sshd_log"])
    done, summary = run(lab, artifacts)
    # One SSH connection per host: the measuring commands (run on every host whose nvidia-smi answers) and every
    # fallback ride the connection the fixed commands came over. A second connection to any host fails here.
    assert accepted(lab["sshd_log"]) - before == len(PROFILES)
    assert done.returncode == 1, done.stderr
    got: dict[str, dict[str, str]] = {}
    for check in summary["checks"]:
        got.setdefault(check["host"], {})[check["id"]] = check["status"]
    for host in lab["hosts"]:
        assert got[host["name"]] == expected(host["profile"]), host["name"]
    # The host that is down is an error for that host only; the others went on.
    down = [c for c in summary["checks"] if c["host"] == "down-99"]
    assert [(c["id"], c["status"]) for c in down] == [("host.reachable", "error")]
    assert "cannot reach down-99" in down[0]["message"]
    assert summary["metrics"]["hosts"] == len(PROFILES) + 1
    assert f"[{len(PROFILES) + 1}/{len(PROFILES) + 1}]" in done.stderr  # progress: hosts done and failing


def test_failures_say_what_and_how_to_fix(lab: dict[str, Any], artifacts: Path) -> None:
    done, summary = run(lab, artifacts, "--limit", "ecc-errors-*:driver-mismatch-*:selinux-label-*")
    assert done.returncode == 1
    failed = {(c["host"].rsplit("-", 1)[0], c["id"]): c for c in summary["checks"] if c["status"] == "failed"}
    ecc = failed[("ecc-errors", "gpu.ecc_volatile")]
    assert "GPU 1 (00000000:1C:00.0): 2 volatile uncorrectable" in ecc["message"]
    xid = failed[("ecc-errors", "gpu.xid")]
    assert xid["message"].startswith("hardware Xid in the last 24 h: 48 (Double Bit ECC Error")
    assert "nvidia-smi -q -x" in ecc["evidence"] and ecc["remedy"]
    driver = failed[("driver-mismatch", "driver.version")]
    assert driver["message"] == "driver 530.30.02 is installed, the inventory pins 535.54.03"
    label = failed[("selinux-label", "node.selinux_labels")]
    assert "/dev/nvidia2 is system_u:object_r:device_t:s0" in label["message"]


def test_a_gpu_at_half_its_mates_fails_alone_by_name(lab: dict[str, Any], artifacts: Path) -> None:
    done, summary = run(lab, artifacts, "--limit", "slow-gpu-*:h100-x8-*", "--only", "perf.h2d_bandwidth")
    assert done.returncode == 1, done.stdout
    [failing] = [c for c in summary["checks"] if c["status"] == "failed"]
    assert failing["host"].startswith("slow-gpu-") and failing["id"] == "perf.h2d_bandwidth"
    # Exactly GPU 5, with its figure and its mates' median (and the H100's lower bound, Azure's 48 GB/s).
    assert failing["message"] == (
        "GPU 5 (00000000:AB:00.0): 28.19 GB/s below the NVIDIA H100 80GB HBM3 lower bound 48 GB/s and "
        "below 85% of its 7 mate(s)' median 56.35 GB/s on this node"
    )
    assert "spread 0" in failing["evidence"] and "3 sample(s)" in failing["evidence"]
    assert f"/{failing['host']}/bin/nvbandwidth -t host_to_device_memcpy_ce, 3 runs" in failing["evidence"]
    # --only brings the driver checks the measurement depends on: they pass on both hosts.
    [healthy] = [c for c in summary["checks"] if c["host"].startswith("h100-x8-") and c["id"] == "perf.h2d_bandwidth"]
    assert healthy["status"] == "passed"


def test_a_busy_gpu_names_the_process_holding_it(lab: dict[str, Any], artifacts: Path) -> None:
    done, summary = run(lab, artifacts, "--limit", "busy-gpu-*", "--only", "perf.h2d_bandwidth,perf.d2h_bandwidth")
    assert done.returncode == 1
    measured = [c for c in summary["checks"] if c["id"].startswith("perf.")]
    assert len(measured) == 2 and all(c["status"] == "passed" for c in summary["checks"] if c not in measured)
    for check in measured:
        assert check["status"] == "failed"
        assert check["message"] == ("GPU 2 (00000000:3A:00.0) is busy, not judged: pid 4242 python3 (30000 MiB)")


def test_healthy_hosts_exit_0_and_unreachable_alone_exits_3(lab: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    done, summary = run(lab, tmp_path / "a", "--limit", "v100-x4-*:a100-x4-*:h100-x8-*")
    assert done.returncode == 0, done.stdout
    assert summary["counts"]["failed"] == summary["counts"]["error"] == 0
    done, _ = run(lab, tmp_path / "b", "--limit", "down-99", "--host-timeout", "20")
    assert done.returncode == 3


def test_metrics_file_has_each_gpus_figure_and_bound_per_host(lab: dict[str, Any], artifacts: Path) -> None:
    from tests.integration.core.test_metrics_textfile import series
    from tests.promtool import check_metrics

    prom = artifacts.parent / "gpu-node.prom"
    args = ("--limit", "slow-gpu-*:h100-x8-*", "--only", "perf.h2d_bandwidth", "--metrics", str(prom))
    done, summary = run(lab, artifacts, *args)
    assert done.returncode == 1, done.stdout
    text = prom.read_text()
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    figures = {
        (s["host"].rsplit("-", 1)[0], s["gpu"]): (s, v)
        for s, v in series(text, "gpuready_h2d_bandwidth_bytes_per_second")
    }
    assert len(figures) == 16  # 8 GPUs on each of the two hosts
    slow, value = figures[("slow-gpu", "5")]
    assert value == pytest.approx(28.19e9) and slow["bus_id"] == "00000000:AB:00.0"
    assert slow["model"] == "NVIDIA H100 80GB HBM3" and slow["check"] == "perf.h2d_bandwidth"
    # the figure in summary.json is the same one, in the unit the reports show
    [recorded] = [
        f for f in summary["metrics"]["figures"]
        if f["name"] == "h2d_bandwidth" and f["labels"]["host"] == slow["host"] and f["labels"]["gpu"] == "5"
    ]  # fmt: skip
    assert recorded["unit"] == "GB/s" and recorded["value"] == pytest.approx(28.19)
    bounds = {v for _, v in series(text, "gpuready_h2d_bandwidth_lower_bound_bytes_per_second")}
    assert bounds == {48e9}  # the H100's bound the message names
    # --only also runs the driver checks the measured one depends on: judge the measured check's results.
    results = {
        (s["host"].rsplit("-", 1)[0], s["status"])
        for s, _ in series(text, "gpuready_check_results")
        if s["check"] == "perf.h2d_bandwidth"
    }
    assert results == {("slow-gpu", "failed"), ("h100-x8", "passed")}
