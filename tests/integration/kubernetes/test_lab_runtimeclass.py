"""The NVIDIA runtime as a RuntimeClass, and nodes whose hostname label is not their name, on the lab's real control
plane: `provision cluster --tags kubernetes` then `validate cluster`, with kubectl watching the test pods that
`validate cluster` creates (and deletes) as the real API server stores them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ModuleTmp
from tests.integration.kubernetes.conftest import LabCluster, eventually

pytestmark = pytest.mark.slow
GPU_NODES = ["stor1.lab.local", "stor2.lab.local"]
#: What the kubelet would set with --hostname-override (or a cloud provider): a hostname label unlike the node name.
OTHER_HOSTNAME = "stor1-hostname"
DS = "nvidia-device-plugin-daemonset"


@pytest.fixture(scope="module")
def inventory(lab: LabCluster, module_tmp: ModuleTmp) -> Iterator[Path]:
    """The lab's inventory with the NVIDIA runtime offered through a RuntimeClass, provisioned."""
    inventory = module_tmp("inv") / "inventory"
    shutil.copytree(lab.inventory, inventory)
    settings_file = inventory / "group_vars/all/gpuready.yml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["gpuready"]["kubernetes"]["nvidia_runtime"] = "runtimeclass"
    # A pod pinned to a node that is not there stays Pending: say so within a minute, not five.
    settings["gpuready"]["kubernetes"]["pod_timeout_s"] = 60
    settings_file.write_text(yaml.safe_dump(settings))
    runs = module_tmp("runs")
    rc, out, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=runs, inventory=inventory)
    assert rc == 0, out + err
    yield inventory
    # The shared lab as it was.
    lab.run("provision", "cluster", "--tags", "kubernetes", "--remove", artifacts=runs / "restore", inventory=inventory)
    lab.forget_removed_plugin()


def _watched_pods(lab: LabCluster, run: Any, folder: Path) -> tuple[Any, list[dict[str, Any]]]:
    """Run ``run()`` while kubectl watches the validation namespace; every pod version kubectl saw."""
    args = [lab.kubectl.binary, "--kubeconfig", lab.kubectl.kubeconfig, "get", "pods", "-n", "gpuready-validation"]
    # Into a file, not a pipe read only at the end: a pipe holds 64 KiB, a few pod versions, and kubectl would
    # block on it and see no more.
    seen_file = folder / "watch.json"
    with seen_file.open("w") as sink:
        watch = subprocess.Popen([*args, "-w", "-o", "json"], stdout=sink, stderr=subprocess.PIPE, text=True)
        try:
            # kubectl lists, then watches: pods created before its watch opened are in its first listing, and
            # `validate cluster` deletes its pods only at the end, seconds after kubectl started.
            time.sleep(1)
            assert watch.poll() is None, watch.stderr.read() if watch.stderr else ""
            result = run()
        finally:
            watch.terminate()
            watch.communicate(timeout=30)
    out = seen_file.read_text()
    decoder, seen, at = json.JSONDecoder(), [], 0
    while at < len(out.strip()):
        while out[at].isspace():
            at += 1
        try:
            obj, at = decoder.raw_decode(out, at)
        except json.JSONDecodeError:
            # Only the last object may be cut, by the terminate that ended the watch.
            assert "\n}\n{" not in out[at:], out[at:][:2000]
            break
        seen.append(obj)
    return result, seen


def test_test_pods_name_the_runtimeclass_and_pin_by_the_nodes_hostname_label(
    lab: LabCluster, inventory: Path, tmp_path: Path
) -> None:
    lab.kubectl.run("label", "node", GPU_NODES[0], f"kubernetes.io/hostname={OTHER_HOSTNAME}", "--overwrite")
    try:
        (rc, out, err, summary), pods = _watched_pods(
            lab, lambda: lab.run("validate", "cluster", artifacts=tmp_path / "runs", inventory=inventory), tmp_path
        )
    finally:
        lab.kubectl.run("label", "node", GPU_NODES[0], f"kubernetes.io/hostname={GPU_NODES[0]}", "--overwrite")
    assert rc == 0, out + err
    checks = {(c["id"], c["host"]): c for c in summary["checks"]}
    for node in GPU_NODES:
        assert checks[("cluster.cuda_vector_add", node)]["status"] == "passed", checks[
            ("cluster.cuda_vector_add", node)
        ]
    specs = {p["metadata"]["name"]: p["spec"] for p in pods}
    assert len(specs) == len(GPU_NODES), sorted(specs)
    # As the API server stored them: the RuntimeClass named, each pod on the node it was meant for.
    assert {s.get("runtimeClassName") for s in specs.values()} == {"nvidia"}
    selectors = sorted(s["nodeSelector"]["kubernetes.io/hostname"] for s in specs.values())
    assert selectors == sorted([OTHER_HOSTNAME, GPU_NODES[1]])
    ran_on = sorted(p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName"))
    assert set(ran_on) == set(GPU_NODES)
    assert lab.test_pods() == []


def test_the_plugin_names_the_runtimeclass_gpuready_applied(lab: LabCluster, inventory: Path) -> None:
    runtime_class = lab.kubectl.json("get", "runtimeclass", "nvidia")
    assert runtime_class["handler"] == "nvidia"
    ds = lab.kubectl.json("get", "daemonset", "-n", "kube-system", DS)
    assert ds["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"


def _provision_time_slicing(lab: LabCluster, inventory: Path, replicas: int, runs: Path) -> tuple[set[str], str]:
    """Provision with ``replicas`` time-slicing replicas; the plugin pods' UIDs once the rollout settled, and the
    pod template's configuration checksum."""
    settings_file = inventory / "group_vars/all/gpuready.yml"
    settings = yaml.safe_load(settings_file.read_text())
    # The lab's node stand-in advertises each profile's GPUs, not time-sliced replicas: the advertise wait would
    # only time out, so it is kept short; the rollout is what this test is about.
    settings["gpuready"]["kubernetes"]["device_plugin"] = {"time_slicing_replicas": replicas, "advertise_timeout_s": 1}
    settings_file.write_text(yaml.safe_dump(settings))
    _, out, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=runs, inventory=inventory)
    rollout = next(c for c in summary["checks"] if c["id"] == "kubernetes.device_plugin.rollout")
    assert rollout["status"] == "passed", out + err
    ds = lab.kubectl.json("get", "daemonset", "-n", "kube-system", DS)
    checksum = ds["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    def settled() -> set[str]:
        pods = lab.kubectl.json("get", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return {p["metadata"]["uid"] for p in live} if len(live) == len(pods) == len(GPU_NODES) else set()

    return eventually(settled, timeout=120, what="the plugin pods to settle"), checksum


def test_a_new_time_slicing_configuration_restarts_the_plugin(lab: LabCluster, inventory: Path, tmp_path: Path) -> None:
    """The real DaemonSet controller replaces the plugin pods when only the configuration changed."""
    before, first = _provision_time_slicing(lab, inventory, 2, tmp_path / "two")
    after, second = _provision_time_slicing(lab, inventory, 4, tmp_path / "four")
    assert first != second
    assert before and after and not before & after, (before, after)
    config = lab.kubectl.json("get", "configmap", "-n", "kube-system", "nvidia-device-plugin-config")
    assert "replicas: 4" in config["data"]["config.yaml"]
