"""The whole path a user takes, against the lab's simulated cluster over HTTP on loopback:
`gpuready lab up --components kubernetes`, `provision cluster --tags kubernetes`, `validate cluster`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import gpuready, require
from tests.integration.kubernetes.conftest import Http

pytestmark = pytest.mark.slow
GPU_NODES = ["stor1.lab.local", "stor2.lab.local"]
LABEL = "openshift.com/gpu-accelerator"


class LabCluster:
    def __init__(self, root: Path, flavour: str = "kubernetes") -> None:
        self.root = root
        up = gpuready("lab", "up", "--components", "kubernetes", "--lab-dir", str(root),
                      "--set", f"kubernetes.flavour={flavour}", "--set", "kubernetes.tick=0.05", timeout=120)
        assert up.returncode == 0, up.stderr
        self.inventory = up.stdout.strip().splitlines()[-1]
        folder = root / "kubernetes"
        self.token = (folder / "token").read_text().strip()
        self.http = Http((folder / "url").read_text().strip(), self.token, str(folder / "ca.crt"))

    def run(self, *args: str, artifacts: Path) -> tuple[int, str, str, dict]:
        r = gpuready(*args, "-i", self.inventory, "--artifacts", str(artifacts), timeout=300)
        runs = sorted(artifacts.glob("*/summary.json"))
        summary = json.loads(runs[-1].read_text()) if runs else {}
        return r.returncode, r.stdout, r.stderr, summary

    def down(self) -> None:
        gpuready("lab", "down", "--lab-dir", str(self.root), timeout=60)


def _checks(summary: dict) -> dict[tuple[str, str], dict]:
    return {(c["id"], c["host"]): c for c in summary["checks"]}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabCluster]:
    require(shutil.which("ansible-playbook") or Path(".venv/bin/ansible-playbook").exists(), "ansible-playbook")
    cluster = LabCluster(tmp_path_factory.mktemp("lab"))
    yield cluster
    cluster.down()


@pytest.fixture(scope="module")
def provisioned(lab: LabCluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    # An admin labelled stor2 before gpuready came: --remove must leave that label alone.
    lab.http("PATCH", "/api/v1/nodes/stor2.lab.local", {"metadata": {"labels": {LABEL: "true"}}},
             "application/merge-patch+json", fieldManager="kubectl-label").raise_for_status()
    runs = tmp_path_factory.mktemp("runs")
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=runs)
    assert rc == 0, err
    return {**summary, "runs": str(runs)}


def test_provision_labels_only_gpu_nodes(lab: LabCluster, provisioned: dict) -> None:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in lab.http("GET", "/api/v1/nodes").json()["items"]}
    for name in GPU_NODES:
        assert nodes[name][LABEL] == "true" and nodes[name]["nvidia.com/gpu.present"] == "true"
    assert LABEL not in nodes["infra1.lab.local"] and "nvidia.com/gpu.present" not in nodes["infra1.lab.local"]


def test_provision_artifacts_hold_no_token(lab: LabCluster, provisioned: dict) -> None:
    files = [p for p in Path(provisioned["runs"]).rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert lab.token not in path.read_text(errors="replace"), path


def test_provision_applies_the_daemonset_and_waits_for_the_rollout(lab: LabCluster, provisioned: dict) -> None:
    ds = lab.http("GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-daemonset").json()
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {LABEL: "true"}
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
    assert ds["status"]["numberReady"] == 2
    rollout = _checks(provisioned)[("kubernetes.device_plugin.rollout", "lab-kube-api")]
    assert rollout["status"] == "passed" and "ready on 2 labelled node(s)" in rollout["message"]
    assert [m["manager"] for m in ds["metadata"]["managedFields"] if m["operation"] == "Apply"] == ["gpuready"]


def test_second_provision_changes_nothing_and_resolves_an_apply_conflict(lab: LabCluster, provisioned: dict,
                                                                         tmp_path: Path) -> None:
    ds_path = "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-daemonset"
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "a")
    assert rc == 0, err
    assert summary["metrics"]["changed"] == 0
    # Someone edits a field gpuready owns: the next apply meets a 409 conflict and resolves it by force.
    lab.http("PATCH", ds_path, {"spec": {"template": {"spec": {"priorityClassName": "system-cluster-critical"}}}},
             "application/strategic-merge-patch+json", fieldManager="kubectl-edit").raise_for_status()
    conflict = lab.http.apply(ds_path, {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"}, "spec": {"template": {"spec": {
            "priorityClassName": "system-node-critical"}}}})
    assert conflict.status_code == 409  # what an apply without force gets
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "b")
    assert rc == 0, err
    ds = lab.http("GET", ds_path).json()
    assert ds["spec"]["template"]["spec"]["priorityClassName"] == "system-node-critical"


def test_validate_passes_on_the_healthy_lab(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path)
    assert rc == 0, out + err
    checks = _checks(summary)
    for node in GPU_NODES:
        for check in ("cluster.device_plugin.pod", "cluster.device_plugin.registered", "cluster.gpu.capacity",
                      "cluster.gpu.allocatable", "cluster.cuda_vector_add"):
            assert checks[(check, node)]["status"] == "passed", checks[(check, node)]
        assert "Test PASSED" in checks[("cluster.cuda_vector_add", node)]["evidence"]
    assert checks[("cluster.gpu.none", "infra1.lab.local")]["status"] == "passed"
    # Test pods are gone afterwards.
    pods = lab.http("GET", "/api/v1/namespaces/gpuready-validation/pods").json()["items"]
    assert pods == []
    # The kubeconfig's token never reaches artifacts.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert lab.token not in path.read_text(errors="replace"), path


@pytest.mark.parametrize(("fault", "check", "words"), [
    ("plugin-not-ready", "cluster.device_plugin.pod", "CrashLoopBackOff"),
    ("allocatable-zero", "cluster.gpu.allocatable", "Allocatable nvidia.com/gpu is 0, the inventory says 1"),
    ("vector-add-fails", "cluster.cuda_vector_add", "no CUDA-capable device is detected"),
    ("permission-denied", "cluster.cuda_vector_add", "permission denied"),
])
def test_validate_fails_with_the_right_check(lab: LabCluster, provisioned: dict, tmp_path: Path, fault: str,
                                             check: str, words: str) -> None:
    lab.http.faults(fault)
    try:
        import time

        time.sleep(0.5)  # a few controller steps, so the fault shows in the cluster's state
        rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path)
    finally:
        lab.http.faults()
    assert rc == 1, out + err
    found = _checks(summary)[(check, "stor1.lab.local")]
    assert found["status"] == "failed" and words in found["message"]
    if check == "cluster.cuda_vector_add":
        assert "events:" in found["evidence"] and "log:" in found["evidence"]
    if fault == "permission-denied":
        assert "xserver_misc_device_t" in found["remedy"]
    assert lab.http("GET", "/api/v1/namespaces/gpuready-validation/pods").json()["items"] == []


def test_test_pods_are_removed_after_a_timeout(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    inventory = _copy_inventory(lab, tmp_path, pod_timeout_s=2)
    lab.http.faults("vector-add-hangs")
    try:
        r = gpuready("validate", "cluster", "-i", str(inventory), "--artifacts", str(tmp_path / "runs"))
        pods = lab.http("GET", "/api/v1/namespaces/gpuready-validation/pods").json()["items"]
    finally:
        lab.http.faults()
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    check = _checks(summary)[("cluster.cuda_vector_add", "stor1.lab.local")]
    assert check["status"] == "failed" and "still Running after 2s" in check["message"]
    assert pods == []


def test_test_pods_are_removed_on_ctrl_c(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    lab.http.faults("vector-add-hangs")
    try:
        child = subprocess.Popen([sys.executable, "-m", "gpuready.core.cli", "validate", "cluster", "-i",
                                  lab.inventory, "--artifacts", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not lab.http("GET", "/api/v1/namespaces/gpuready-validation/pods").json()["items"]:
            assert time.monotonic() < deadline and child.poll() is None, "no test pod appeared"
            time.sleep(0.2)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        pods = lab.http("GET", "/api/v1/namespaces/gpuready-validation/pods").json()["items"]
    finally:
        lab.http.faults()
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
    assert child.returncode == 130, err
    assert "cancelled by Ctrl-C" in err and "Traceback" not in err
    assert pods == []
    # What finished before the cancel is written, the test pods that did not finish are marked.
    import json

    [summary] = [json.loads(p.read_text()) for p in tmp_path.glob("*/summary.json")]
    assert "cancelled" in summary["aborted"]
    statuses = {(c["id"], c["host"]): c["status"] for c in summary["checks"]}
    assert any(i == "cluster.device_plugin.pod" and s == "passed" for (i, _), s in statuses.items()), statuses
    cancelled = [c for c in summary["checks"] if c["id"] == "cluster.cuda_vector_add"]
    assert cancelled and all(c["status"] == "error" and "cancelled" in c["message"] for c in cancelled)


def test_forbidden_is_exit_3_with_one_line(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    lab.http.faults("forbidden")
    try:
        rc, _, err, _ = lab.run("validate", "cluster", artifacts=tmp_path)
    finally:
        lab.http.faults()
    assert rc == 3
    errors = [line for line in err.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1 and "403 Forbidden" in errors[0] and "Traceback" not in err


def test_server_errors_are_retried_with_backoff(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    lab.http.faults("unavailable=3")
    rc, out, err, _ = lab.run("validate", "cluster", artifacts=tmp_path)
    stats = lab.http("GET", "/_emulator/stats").json()
    assert rc == 0, out + err
    assert stats["requests"]["503"] >= 3 and stats["unavailable"] == 0


def test_bad_kubeconfig_is_exit_3_with_one_line(lab: LabCluster, tmp_path: Path) -> None:
    inventory = tmp_path / "inv"
    shutil.copytree(lab.inventory, inventory)
    settings_file = inventory / "group_vars/all/gpuready.yml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["gpuready"]["kubernetes"]["kubeconfig"] = str(tmp_path / "missing-kubeconfig")
    settings_file.write_text(yaml.safe_dump(settings))
    r = gpuready("validate", "cluster", "-i", str(inventory), "--artifacts", str(tmp_path / "runs"))
    assert r.returncode == 3 and r.stderr.strip().splitlines()[-1].startswith("gpuready: error: kubeconfig")
    assert "Traceback" not in r.stderr


def _copy_inventory(lab: LabCluster, tmp_path: Path, **kubernetes: object) -> Path:
    inventory = tmp_path / "inv"
    shutil.copytree(lab.inventory, inventory)
    settings_file = inventory / "group_vars/all/gpuready.yml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["gpuready"]["kubernetes"].update(kubernetes)
    settings_file.write_text(yaml.safe_dump(settings))
    return inventory


def test_tls_is_verified_unless_the_inventory_says_otherwise(lab: LabCluster, provisioned: dict,
                                                              tmp_path: Path) -> None:
    # A kubeconfig without the lab's CA: the emulator's certificate cannot be verified.
    config = yaml.safe_load(Path(lab.root / "kubernetes" / "kubeconfig").read_text())
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    untrusted = tmp_path / "kubeconfig"
    untrusted.write_text(yaml.safe_dump(config))
    strict = _copy_inventory(lab, tmp_path / "strict", kubeconfig=str(untrusted))
    r = gpuready("validate", "cluster", "-i", str(strict), "--artifacts", str(tmp_path / "runs"))
    assert r.returncode == 3 and "certificate verify failed" in r.stderr.splitlines()[-1], r.stderr
    relaxed = _copy_inventory(lab, tmp_path / "relaxed", kubeconfig=str(untrusted), verify_tls=False)
    r = gpuready("validate", "cluster", "-i", str(relaxed), "--artifacts", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_rollout_timeout_names_the_nodes_and_why(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    inventory = tmp_path / "inv"
    shutil.copytree(lab.inventory, inventory)
    settings_file = inventory / "group_vars/all/gpuready.yml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["gpuready"]["kubernetes"]["device_plugin"]["rollout_timeout_s"] = 2
    settings_file.write_text(yaml.safe_dump(settings))
    lab.http.faults("plugin-not-ready")
    try:
        import time

        time.sleep(0.5)
        r = gpuready("provision", "cluster", "--tags", "kubernetes", "-i", str(inventory), "--artifacts",
                     str(tmp_path / "runs"))
    finally:
        lab.http.faults()
    assert r.returncode == 1, r.stderr
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    rollout = _checks(summary)[("kubernetes.device_plugin.rollout", "lab-kube-api")]
    assert rollout["status"] == "failed"
    assert "stor1.lab.local: pod" in rollout["message"] and "CrashLoopBackOff" in rollout["message"]


def test_remove_takes_away_the_daemonset_and_only_gpureadys_labels(lab: LabCluster, provisioned: dict,
                                                                    tmp_path: Path) -> None:
    rc, _, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", "--remove", artifacts=tmp_path)
    assert rc == 0, err
    assert lab.http("GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-daemonset"
                    ).status_code == 404
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in lab.http("GET", "/api/v1/nodes").json()["items"]}
    assert LABEL not in nodes["stor1.lab.local"] and "nvidia.com/gpu.present" not in nodes["stor1.lab.local"]
    assert nodes["stor2.lab.local"][LABEL] == "true"  # the admin's own label stays
    assert "nvidia.com/gpu.present" not in nodes["stor2.lab.local"]
