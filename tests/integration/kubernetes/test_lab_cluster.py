"""The whole path a user takes, against the lab's real Kubernetes control plane with kwok GPU nodes:
`gpuready lab up --components kubernetes`, `provision cluster --tags kubernetes`, `validate cluster`,
read back with kubectl.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.core.settings.kubernetes import DevicePlugin
from gpuready.lab.kubernetes import KUBERNETES_VERSION
from tests.conftest import ModuleTmp, gpuready
from tests.integration.kubernetes.conftest import LabCluster, eventually, the_one_error

pytestmark = pytest.mark.slow
GPU_NODES = ["stor1.lab.local", "stor2.lab.local"]
LABEL = "openshift.com/gpu-accelerator"
DS = "nvidia-device-plugin-daemonset"


def _checks(summary: dict) -> dict[tuple[str, str], dict]:
    return {(c["id"], c["host"]): c for c in summary["checks"]}


@pytest.fixture(scope="module")
def provisioned(lab: LabCluster, module_tmp: ModuleTmp) -> Iterator[dict]:
    # An admin labelled stor2 before gpuready came: --remove must leave that label alone.
    lab.kubectl.run("label", "node", "stor2.lab.local", f"{LABEL}=true")
    runs = module_tmp("runs")
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=runs)
    assert rc == 0, err
    yield {**summary, "runs": str(runs)}
    # The shared lab as it was: test_remove_... removes what gpuready applied, unless it did not run.
    if lab.kubectl.run("get", "daemonset", "-n", "kube-system", DS, check=False).returncode == 0:
        lab.run("provision", "cluster", "--tags", "kubernetes", "--remove", artifacts=runs / "restore")
    lab.kubectl.run("label", "node", "stor2.lab.local", f"{LABEL}-")
    lab.forget_removed_plugin()


def test_the_lab_runs_the_pinned_release_of_the_real_control_plane(lab: LabCluster) -> None:
    names = {Path(os.readlink(f"/proc/{pid}/exe")).name for pid in lab.state["pids"]}
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} <= names
    config = yaml.safe_load(Path(lab.state["admin_kubeconfig"]).read_text())
    user = config["users"][0]["user"]
    folder = lab.root / "kubernetes" / "pki"
    context = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    context.load_cert_chain(str(folder / "admin.crt"), str(folder / "admin.key"))
    with urllib.request.urlopen(f"{lab.state['url']}/version", context=context, timeout=10) as answer:
        assert json.load(answer)["gitVersion"] == KUBERNETES_VERSION
    assert base64.b64decode(user["client-certificate-data"]) == (folder / "admin.crt").read_bytes()
    # No anonymous access: the API wants a client certificate.
    bare = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{lab.state['url']}/api/v1/nodes", context=bare, timeout=10)
    assert e.value.code == 401


def test_gpus_are_advertised_only_while_the_plugin_runs(lab: LabCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in lab.kubectl.json("get", "nodes")["items"]}
    assert set(nodes) == {*GPU_NODES, "infra1.lab.local"}
    for node in nodes.values():
        assert (
            "nvidia.com/gpu" not in node["status"]["allocatable"]
            or node["status"]["allocatable"]["nvidia.com/gpu"] == "0"
        )


def test_validate_before_provisioning_fails_once_per_node_for_the_missing_plugin(
    lab: LabCluster, tmp_path: Path
) -> None:
    """No device plugin yet: one failure per GPU node, with the remedy that provisions it; the GPUs the plugin
    would advertise, its log and the test pod are not failed again for the same cause, they name it."""
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path)
    assert rc == 1, out + err
    checks = _checks(summary)
    root = "depends on cluster.device_plugin.pod (no device-plugin pod on this node)"
    for node in GPU_NODES:
        assert checks[("cluster.device_plugin.pod", node)]["status"] == "failed"
        assert "gpuready provision cluster --tags kubernetes" in checks[("cluster.device_plugin.pod", node)]["remedy"]
        for dependant in (
            "cluster.gpu.capacity",
            "cluster.gpu.allocatable",
            "cluster.device_plugin.registered",
            "cluster.cuda_vector_add",
        ):
            assert (checks[(dependant, node)]["status"], checks[(dependant, node)]["message"]) == ("skipped", root)
    failing = {c["id"] for c in summary["checks"] if c["status"] == "failed"}
    assert failing == {"cluster.device_plugin.pod"}, failing
    assert "nvidia-smi" not in out and "plugin log" not in out, out


def test_provision_labels_only_gpu_nodes(lab: LabCluster, provisioned: dict) -> None:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in lab.kubectl.json("get", "nodes")["items"]}
    for name in GPU_NODES:
        assert nodes[name][LABEL] == "true" and nodes[name]["nvidia.com/gpu.present"] == "true"
    assert LABEL not in nodes["infra1.lab.local"] and "nvidia.com/gpu.present" not in nodes["infra1.lab.local"]


def test_provision_artifacts_hold_no_credential(lab: LabCluster, provisioned: dict) -> None:
    key = yaml.safe_load(Path(lab.state["kubeconfig"]).read_text())["users"][0]["user"]["client-key-data"]
    files = [p for p in Path(provisioned["runs"]).rglob("*") if p.is_file()]
    assert files
    for path in files:
        text = path.read_text(errors="replace")
        assert key[20:80] not in text and "PRIVATE KEY" not in text, path


def test_provision_applies_the_daemonset_and_waits_for_the_rollout(lab: LabCluster, provisioned: dict) -> None:
    ds = lab.kubectl.json("get", "daemonset", "-n", "kube-system", DS, "--show-managed-fields")
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {LABEL: "true"}
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["containers"][0]["image"] == f"nvcr.io/nvidia/k8s-device-plugin:{DevicePlugin().version}"
    assert ds["status"]["numberReady"] == 2 and ds["status"]["desiredNumberScheduled"] == 2
    rollout = _checks(provisioned)[("kubernetes.device_plugin.rollout", "lab-kube-api")]
    assert rollout["status"] == "passed" and "ready on 2 labelled node(s)" in rollout["message"]
    assert [m["manager"] for m in ds["metadata"]["managedFields"] if m["operation"] == "Apply"] == ["gpuready"]
    # The real DaemonSet controller put one plugin pod on each labelled node, none on the CPU node.
    pods = lab.kubectl.json("get", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == GPU_NODES


def test_provision_waits_until_each_gpu_node_advertises_its_gpus(lab: LabCluster, provisioned: dict) -> None:
    """What the lab's kubelet stand-in put in each Node's status, read with kubectl, is what provision waited for."""
    gpus = _checks(provisioned)[("kubernetes.device_plugin.gpus", "lab-kube-api")]
    assert gpus["status"] == "passed" and gpus["remedy"] == "", gpus
    evidence = json.loads(gpus["evidence"])
    nodes = {n["metadata"]["name"]: n["status"]["allocatable"] for n in lab.kubectl.json("get", "nodes")["items"]}
    assert evidence["advertised"] == {name: int(nodes[name].get("nvidia.com/gpu", 0)) for name in nodes}
    assert evidence["expected"] == {name: int(nodes[name]["nvidia.com/gpu"]) for name in GPU_NODES}
    assert all(int(nodes[name]["nvidia.com/gpu"]) > 0 for name in GPU_NODES)


def test_second_provision_changes_nothing(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path)
    assert rc == 0, err
    assert summary["metrics"]["changed"] == 0


def test_a_field_another_manager_owns_is_not_taken_over(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    # Someone edits a field gpuready applies: the real API server now records kubectl-edit as its owner.
    edit = {"spec": {"template": {"spec": {"priorityClassName": "system-cluster-critical"}}}}
    lab.kubectl.run(
        "patch", "daemonset", "-n", "kube-system", DS, "--field-manager", "kubectl-edit", "-p", json.dumps(edit)
    )
    try:
        rc, out, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path)
        ds = lab.kubectl.json("get", "daemonset", "-n", "kube-system", DS)
        assert rc == 1, out + err
        assert ds["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"  # left alone
        report = json.dumps(summary) + out + err
        assert "conflict" in report and "kubectl-edit" in report and "priorityClassName" in report
    finally:
        # The editor puts gpuready's value back; a field both apply with the same value is no conflict.
        edit["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
        lab.kubectl.run(
            "patch", "daemonset", "-n", "kube-system", DS, "--field-manager", "kubectl-edit", "-p", json.dumps(edit)
        )
    rc, out, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "again")
    assert rc == 0, out + err


def test_validate_passes_on_the_healthy_lab(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path)
    assert rc == 0, out + err
    checks = _checks(summary)
    for node in GPU_NODES:
        for check in (
            "cluster.device_plugin.pod",
            "cluster.device_plugin.registered",
            "cluster.gpu.capacity",
            "cluster.gpu.allocatable",
            "cluster.cuda_vector_add",
        ):
            assert checks[(check, node)]["status"] == "passed", checks[(check, node)]
        assert "Test PASSED" in checks[("cluster.cuda_vector_add", node)]["evidence"]
    assert checks[("cluster.gpu.none", "infra1.lab.local")]["status"] == "passed"
    assert lab.test_pods() == []


def test_kubectl_reads_what_gpuready_reports(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    """kubectl, an independent client, reads labels, allocatable GPUs, the rollout and a vector-add log."""
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path)
    assert rc == 0, out + err
    checks = _checks(summary)
    nodes = {n["metadata"]["name"]: n for n in lab.kubectl.json("get", "nodes")["items"]}
    for name in GPU_NODES:
        assert nodes[name]["metadata"]["labels"][LABEL] == "true"
        allocatable = nodes[name]["status"]["allocatable"]["nvidia.com/gpu"]
        assert checks[("cluster.gpu.allocatable", name)]["message"] == f"nvidia.com/gpu: {allocatable}"
    rollout = lab.kubectl.run("rollout", "status", "daemonset", DS, "-n", "kube-system", "--timeout=30s")
    assert "successfully rolled out" in rollout.stdout
    for pod in lab.kubectl.json("get", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")["items"]:
        plugin_log = lab.kubectl.run("logs", "-n", "kube-system", pod["metadata"]["name"]).stdout
        evidence = checks[("cluster.device_plugin.registered", pod["spec"]["nodeName"])]["evidence"]
        assert evidence in plugin_log
    # A cuda-vector-add pod of kubectl's own on stor1: the real scheduler places it, kwok runs it, and its log is
    # the one gpuready reported.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kubectl-vector-add", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": "stor1.lab.local"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "cuda-vector-add",
                    "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }
    lab.kubectl.run("apply", "-f", "-", stdin=json.dumps(pod))
    try:
        eventually(
            lambda: lab.kubectl.json("get", "pod", "kubectl-vector-add")["status"].get("phase") == "Succeeded",
            what="kubectl's vector-add pod to succeed",
        )
        log = lab.kubectl.run("logs", "kubectl-vector-add").stdout
    finally:
        lab.kubectl.run("delete", "pod", "kubectl-vector-add", "--wait=false")
    assert log.strip() == checks[("cluster.cuda_vector_add", "stor1.lab.local")]["evidence"].strip()


def test_metrics_file_has_the_gpus_each_node_advertises(lab: LabCluster, provisioned: dict, tmp_path: Path) -> None:
    """--metrics: each GPU node's advertised GPUs as kubectl reads them, in a textfile promtool accepts."""
    from tests.integration.core.test_metrics_textfile import series
    from tests.promtool import check_metrics

    prom = tmp_path / "cluster.prom"
    rc, out, err, summary = lab.run("validate", "cluster", "--metrics", str(prom), artifacts=tmp_path / "runs")
    assert rc == 0, out + err
    text = prom.read_text()
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    nodes = {n["metadata"]["name"]: n["status"] for n in lab.kubectl.json("get", "nodes")["items"]}
    advertised = {(s["host"], s["field"]): v for s, v in series(text, "gpuready_kubernetes_node_gpus")}
    assert advertised == {
        (node, field): float(nodes[node][field]["nvidia.com/gpu"])
        for node in GPU_NODES
        for field in ("capacity", "allocatable")
    }
    expected = {s["host"]: v for s, v in series(text, "gpuready_kubernetes_node_expected_gpus")}
    assert expected == dict.fromkeys(GPU_NODES, 1.0)  # the lab's T4 node class
    results = {(s["check"], s["host"]) for s, _ in series(text, "gpuready_check_results")}
    assert results == {(c["id"], c["host"]) for c in summary["checks"]}


def _fields(pod: object) -> dict:
    """The fields of a pod that validate cluster reads, by the client models' attribute names."""
    p: Any = pod
    return {
        "name": p.metadata.name,
        "namespace": p.metadata.namespace,
        "node": p.spec.node_name,
        "phase": p.status.phase,
        "conditions": [(c.type, c.status, c.reason) for c in p.status.conditions or []],
        "containers": [
            (
                c.name,
                c.restart_count,
                bool(c.state.running),
                c.state.waiting and (c.state.waiting.reason, c.state.waiting.message),
                c.state.terminated and (c.state.terminated.reason, c.state.terminated.exit_code),
            )
            for c in p.status.container_statuses or []
        ],
    }


def test_plain_json_reads_match_the_client_models(lab: LabCluster, provisioned: dict) -> None:
    """validate cluster reads pods, nodes and logs as JSON (Kube.read), not through the kubernetes client's
    models; the models, read from the same real API server, are the oracle for every field it uses."""
    from functools import partial

    from gpuready.core.platforms import kube
    from gpuready.core.settings import Kubernetes

    client = kube.connect(Kubernetes(kubeconfig=lab.state["kubeconfig"], context="gpuready-lab"))
    listing = partial(client.core.list_namespaced_pod, "kube-system", label_selector="name=nvidia-device-plugin-ds")
    models = {p.metadata.name: p for p in client.call(listing, "list plugin pods").items}
    plain = {p.metadata.name: p for p in client.items(listing, "list plugin pods")}
    assert sorted(plain) == sorted(models) and len(plain) == len(GPU_NODES)
    for name, pod in plain.items():
        assert _fields(pod) == _fields(models[name])
        log = partial(client.core.read_namespaced_pod_log, name, "kube-system")
        assert client.text(log, "read a log") == client.call(log, "read a log")
    node_models = {n.metadata.name: n.status for n in client.call(client.core.list_node, "list nodes").items}
    for node in client.items(client.core.list_node, "list nodes"):
        model = node_models[node.metadata.name]
        assert node.status.capacity.get("nvidia.com/gpu") == model.capacity.get("nvidia.com/gpu")
        assert node.status.allocatable.get("nvidia.com/gpu") == model.allocatable.get("nvidia.com/gpu")
    with pytest.raises(kube.NotFound):
        client.read(partial(client.core.read_namespaced_pod, "no-such-pod", "kube-system"), "read a pod")


def test_missing_permission_is_exit_3_naming_verb_and_resource(
    lab: LabCluster, provisioned: dict, tmp_path: Path
) -> None:
    with lab.without("rolebinding", "gpuready-validation", "-n", "gpuready-validation"):
        rc, _, err, _ = lab.run("validate", "cluster", artifacts=tmp_path)
    error = the_one_error(rc, err)
    assert 'cannot create resource "pods"' in error and "gpuready-validation" in error


def test_bad_kubeconfig_is_exit_3_with_one_line(lab: LabCluster, tmp_path: Path) -> None:
    inventory = _copy_inventory(lab, tmp_path, kubeconfig=str(tmp_path / "missing-kubeconfig"))
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


def test_tls_is_verified_unless_the_inventory_says_otherwise(
    lab: LabCluster, provisioned: dict, tmp_path: Path
) -> None:
    # A kubeconfig without the lab's CA: the API server's certificate cannot be verified.
    config = yaml.safe_load(Path(lab.state["kubeconfig"]).read_text())
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    untrusted = tmp_path / "kubeconfig"
    untrusted.write_text(yaml.safe_dump(config))
    strict = _copy_inventory(lab, tmp_path / "strict", kubeconfig=str(untrusted))
    r = gpuready("validate", "cluster", "-i", str(strict), "--artifacts", str(tmp_path / "runs"))
    assert r.returncode == 3 and "certificate verify failed" in r.stderr.splitlines()[-1], r.stderr
    relaxed = _copy_inventory(lab, tmp_path / "relaxed", kubeconfig=str(untrusted), verify_tls=False)
    r = gpuready("validate", "cluster", "-i", str(relaxed), "--artifacts", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_wrong_ca_is_exit_3_with_one_line_for_provision_check_and_validate(lab: LabCluster, tmp_path: Path) -> None:
    """A kubeconfig that trusts another CA than the API server's: TLS fails, which says nothing about the
    machines, so it is "could not reach" (exit 3), one line, never a finding (exit 1) or a traceback."""
    from gpuready.lab.pki import Authority

    config = yaml.safe_load(Path(lab.state["kubeconfig"]).read_text())
    other = Authority(tmp_path / "other-ca").ca_path.read_bytes()
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(other).decode()
    wrong = tmp_path / "kubeconfig"
    wrong.write_text(yaml.safe_dump(config))
    inventory = _copy_inventory(lab, tmp_path, kubeconfig=str(wrong))
    for command in (("provision", "cluster", "--tags", "kubernetes", "--check"), ("validate", "cluster")):
        rc, out, err, summary = lab.run(*command, artifacts=tmp_path / command[0], inventory=inventory)
        errors = [line for line in err.splitlines() if line.startswith("gpuready: error:")]
        assert rc == 3, f"{command}: {out}{err}"
        assert len(errors) == 1 and "certificate verify failed" in errors[0].lower(), err
        assert "Traceback" not in out + err
        assert not [c for c in summary.get("checks", []) if c["status"] == "failed"], summary


def test_remove_takes_away_the_daemonset_and_only_gpureadys_labels(
    lab: LabCluster, provisioned: dict, tmp_path: Path
) -> None:
    rc, _, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", "--remove", artifacts=tmp_path)
    assert rc == 0, err
    assert lab.kubectl.run("get", "daemonset", "-n", "kube-system", DS, check=False).returncode != 0
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in lab.kubectl.json("get", "nodes")["items"]}
    assert LABEL not in nodes["stor1.lab.local"] and "nvidia.com/gpu.present" not in nodes["stor1.lab.local"]
    assert nodes["stor2.lab.local"][LABEL] == "true"  # the admin's own label stays
    assert "nvidia.com/gpu.present" not in nodes["stor2.lab.local"]
    # With the plugin gone, the stand-in device manager takes the GPUs out of allocatable.
    eventually(
        lambda: all(
            n["status"]["allocatable"].get("nvidia.com/gpu", "0") == "0"
            for n in lab.kubectl.json("get", "nodes")["items"]
        ),
        what="GPUs to leave allocatable",
    )


def test_client_errors_against_the_real_api_are_one_line(lab: LabCluster, tmp_path: Path) -> None:
    from kubernetes.client import V1Namespace

    from gpuready.core.errors import Unreachable
    from gpuready.core.platforms import kube
    from gpuready.core.settings import Kubernetes
    from gpuready.lab.kubernetes import kubeconfig
    from gpuready.lab.pki import Authority

    client = kube.connect(Kubernetes(kubeconfig=lab.state["kubeconfig"]))
    names = sorted(n.metadata.name for n in client.call(lambda: client.core.list_node().items, "list nodes"))
    assert names == ["infra1.lab.local", *GPU_NODES]
    with pytest.raises(kube.NotFound):
        client.call(lambda: client.core.read_node("nope"), "read node")
    with pytest.raises(kube.Conflict):
        client.call(
            lambda: client.core.create_namespace(V1Namespace.from_dict({"metadata": {"name": "default"}})),
            "create namespace",
        )
    with pytest.raises(Unreachable, match="kubeconfig"):
        kube.connect(Kubernetes(kubeconfig=lab.state["kubeconfig"], context="nope"))
    # A client certificate from a CA the API server does not trust: 401, one line.
    stranger = Authority(tmp_path / "other-ca")
    cert, key = stranger.issue("gpuready", "gpuready", client=True)
    ca = lab.root / "kubernetes" / "pki" / "ca.crt"
    wrong = kube.connect(
        Kubernetes(kubeconfig=str(kubeconfig(tmp_path / "kc", lab.state["url"], ca, cert, key, "stranger")))
    )
    with pytest.raises(Unreachable, match=r"refused the credentials \(401\)") as e:
        wrong.call(lambda: wrong.core.list_node(), "list nodes")
    assert "\n" not in str(e.value)
    gone = kube.connect(
        Kubernetes(kubeconfig=str(kubeconfig(tmp_path / "kc2", "https://127.0.0.1:9", ca, cert, key, "stranger")))
    )
    with pytest.raises(Unreachable, match=r"cannot reach the Kubernetes API at https://127\.0\.0\.1:9"):
        gone.call(lambda: gone.core.list_node(), "list nodes")
