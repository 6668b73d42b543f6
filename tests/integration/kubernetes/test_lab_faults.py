"""Faulty GPU nodes on the real control plane: each lab node carries one of the Dell/Red Hat TFJobs paper's faults, and
`provision cluster` / `validate cluster` must name the node and the reason; test pods never outlive a run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, ModuleTmp
from tests.integration.kubernetes.conftest import LabCluster, eventually
from tests.integration.kubernetes.test_lab_cluster import _checks, _copy_inventory

pytestmark = pytest.mark.slow
FAULTS = ["plugin-not-ready", "allocatable-zero", "vector-add-fails", "permission-denied", "vector-add-hangs"]
NODE = {fault: f"gpu-{i:04d}.lab.local" for i, fault in enumerate(FAULTS, start=1)}
HEALTHY = "gpu-0006.lab.local"


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[LabCluster]:
    cluster = LabCluster(module_tmp("faulty"), "nodes=6", f"fail={','.join(FAULTS)}")
    yield cluster
    cluster.down()


@pytest.fixture(scope="module")
def provisioned(lab: LabCluster, module_tmp: ModuleTmp) -> dict:
    folder = module_tmp("provision")
    inventory = _copy_inventory(lab, folder, device_plugin={"rollout_timeout_s": 15}, pod_timeout_s=10)
    rc, out, err, summary = lab.run(
        "provision", "cluster", "--tags", "kubernetes", artifacts=folder / "runs", inventory=inventory
    )
    return {"rc": rc, "err": out + err, "summary": summary, "inventory": inventory}


def test_rollout_that_does_not_finish_names_the_node_and_why(provisioned: dict) -> None:
    assert provisioned["rc"] == 1, provisioned["err"]
    rollout = _checks(provisioned["summary"])[("kubernetes.device_plugin.rollout", "lab-kube-api")]
    assert rollout["status"] == "failed"
    assert f"{NODE['plugin-not-ready']}: pod" in rollout["message"] and "CrashLoopBackOff" in rollout["message"]


@pytest.fixture(scope="module")
def validated(lab: LabCluster, provisioned: dict, module_tmp: ModuleTmp) -> dict:
    runs = module_tmp("validate")
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=runs, inventory=provisioned["inventory"])
    return {"rc": rc, "err": out + err, "checks": _checks(summary), "pods": lab.test_pods()}


@pytest.mark.parametrize(
    ("fault", "check", "words"),
    [
        ("plugin-not-ready", "cluster.device_plugin.pod", "CrashLoopBackOff"),
        ("allocatable-zero", "cluster.gpu.allocatable", "Allocatable nvidia.com/gpu is 0, the inventory says 1"),
        ("vector-add-fails", "cluster.cuda_vector_add", "no CUDA-capable device is detected"),
        ("permission-denied", "cluster.cuda_vector_add", "permission denied"),
        ("vector-add-hangs", "cluster.cuda_vector_add", "still Running after 10s"),
    ],
)
def test_validate_fails_the_right_check_on_the_faulty_node(validated: dict, fault: str, check: str, words: str) -> None:
    assert validated["rc"] == 1, validated["err"]
    found = validated["checks"][(check, NODE[fault])]
    assert found["status"] == "failed" and words in found["message"], found
    if check == "cluster.cuda_vector_add":
        assert "events:" in found["evidence"] and "log:" in found["evidence"]
    if fault == "permission-denied":
        assert "xserver_misc_device_t" in found["remedy"]
        # the event kwok recorded for this pod, not another pod's: events are matched to their pod
        assert "Warning Failed: Error: failed to create containerd task" in found["evidence"]
        other = validated["checks"][("cluster.cuda_vector_add", NODE["vector-add-fails"])]["evidence"]
        assert "failed to create containerd task" not in other
    assert validated["checks"][("cluster.cuda_vector_add", HEALTHY)]["status"] == "passed"
    assert validated["pods"] == []


def test_plugin_log_shows_why_it_did_not_register(validated: dict) -> None:
    found = validated["checks"][("cluster.device_plugin.registered", NODE["plugin-not-ready"])]
    # Not failed a second time for the pod that is not Ready (its root cause), but its log is the evidence.
    assert found["status"] == "skipped" and found["message"].startswith("depends on cluster.device_plugin.pod (")
    assert "Failed to initialize NVML" in found["evidence"]


def _validate_in_background(provisioned: dict, artifacts: Path) -> subprocess.Popen[str]:
    argv = ["validate", "cluster", "-i", str(provisioned["inventory"]), "--artifacts", str(artifacts)]
    return subprocess.Popen(
        [sys.executable, "-m", "gpuready.core.cli", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_test_pods_are_removed_on_ctrl_c(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    child = _validate_in_background(provisioned, tmp_path)
    try:
        eventually(lambda: lab.test_pods() or child.poll() is not None, timeout=120, what="a test pod")
        assert child.poll() is None, "validate ended before it created its pods"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "cancelled by Ctrl-C" in err and "Traceback" not in err
    # What finished before the cancel is written, the test pods that did not finish are marked.
    [summary] = [json.loads(p.read_text()) for p in tmp_path.glob("*/summary.json")]
    assert "cancelled" in summary["aborted"]
    statuses = {(c["id"], c["host"]): c["status"] for c in summary["checks"]}
    assert any(i == "cluster.device_plugin.pod" and s == "passed" for (i, _), s in statuses.items()), statuses
    cancelled = [c for c in summary["checks"] if c["id"] == "cluster.cuda_vector_add"]
    assert cancelled and any(c["status"] == "error" and "cancelled" in c["message"] for c in cancelled)
    # kubectl sees no test pod left (deleting ones finish within the grace period of 0s).
    eventually(lambda: lab.test_pods() == [], timeout=30, what="the test pods to go")


def test_apiserver_stopped_mid_run_is_exit_3_with_results_written(
    lab: LabCluster, provisioned: dict, tmp_path: Path
) -> None:
    import os

    child = _validate_in_background(provisioned, tmp_path)
    apiserver = lab.state["pids"][1]
    try:
        eventually(lambda: lab.test_pods() or child.poll() is not None, timeout=120, what="a test pod")
        # The API stops answering for longer than gpuready's read timeout (30s), then comes back so the
        # run can still delete its pods on the way out.
        os.kill(apiserver, signal.SIGSTOP)
        time.sleep(40)
        os.kill(apiserver, signal.SIGCONT)
        _, err = child.communicate(timeout=180)
    finally:
        os.kill(apiserver, signal.SIGCONT)
        if child.poll() is None:
            child.kill()
    assert child.returncode == 3, err
    errors = [line for line in err.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1 and lab.state["url"] in errors[0] and "Traceback" not in err
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert any(c["id"] == "cluster.gpu.allocatable" for c in summary["checks"])
    eventually(lambda: lab.test_pods() == [], timeout=60, what="the test pods to go")


def test_provision_fails_naming_the_gpu_node_whose_ready_plugin_advertises_no_gpus(tmp_path: Path) -> None:
    """A plugin pod that is Ready but registers no GPU (allocatable 0) fails provisioning, naming only that node."""
    lab = LabCluster(tmp_path / "lab", "nodes=2", "fail=allocatable-zero")
    try:
        inventory = _copy_inventory(lab, tmp_path, device_plugin={"advertise_timeout_s": 6})
        rc, out, err, summary = lab.run(
            "provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "runs", inventory=inventory
        )
        assert rc == 1, out + err
        checks = _checks(summary)
        assert checks[("kubernetes.device_plugin.rollout", "lab-kube-api")]["status"] == "passed"
        gpus = checks[("kubernetes.device_plugin.gpus", "lab-kube-api")]
        allocatable = lab.kubectl.json("get", "node", "gpu-0001.lab.local")["status"]["allocatable"]
        assert allocatable["nvidia.com/gpu"] == "0"
        assert gpus["status"] == "failed"
        assert "after 6s: gpu-0001.lab.local: 0 of 1" in gpus["message"] and "gpu-0002" not in gpus["message"]
        assert json.loads(gpus["evidence"])["advertised"]["gpu-0001.lab.local"] == 0
        assert "logs -l name=nvidia-device-plugin-ds" in gpus["remedy"]
        assert "Traceback" not in err
    finally:
        lab.down()
