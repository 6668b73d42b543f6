"""The periodic node checks' manifests (core/platforms/kube_node_checks*.yaml), which users apply by hand: valid
against Kubernetes' and OpenShift's schemas, least privilege, and the roles' facts copied exactly (a hand-applied
manifest cannot read the roles' defaults)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuready.core import role_defaults
from gpuready.core.platforms import node_condition
from gpuready.core.settings import Kubernetes
from tests.conftest import ROOT, require
from tests.unit.kubernetes.test_manifests import SCC_SCHEMA, VERSIONS, _openapi_to_json_schema

PLATFORMS = ROOT / "core" / "platforms"
FILES = ("kube_node_checks.yaml", "kube_node_checks_taint.yaml", "kube_node_checks_openshift.yaml")


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((PLATFORMS / name).read_text()) if d]


def _kubernetes_docs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{name}:{d['kind']}/{d['metadata']['name']}", d)
        for name in FILES
        for d in _docs(name)
        if d["kind"] != "SecurityContextConstraints"
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "manifest"), _kubernetes_docs(), ids=[n for n, _ in _kubernetes_docs()])
def test_manifest_is_valid_kubernetes(version: str, name: str, manifest: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(manifest, version, strict=True)


def _one(name: str, kind: str) -> dict[str, Any]:
    [doc] = [d for d in _docs(name) if d["kind"] == kind]
    return doc


def test_the_condition_needs_get_nodes_and_patch_nodes_status_and_the_taint_patch_nodes_only() -> None:
    rules = _one("kube_node_checks.yaml", "ClusterRole")["rules"]
    assert sorted((r["resources"][0], tuple(r["verbs"])) for r in rules) == [
        ("nodes", ("get",)),
        ("nodes/status", ("patch",)),
    ]
    assert all(r["apiGroups"] == [""] and len(r["resources"]) == 1 for r in rules)
    [taint_rule] = _one("kube_node_checks_taint.yaml", "ClusterRole")["rules"]
    assert taint_rule == {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}
    account = _one("kube_node_checks.yaml", "ServiceAccount")["metadata"]
    for name in FILES:
        for binding in (d for d in _docs(name) if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
            assert binding["subjects"] == [{"kind": "ServiceAccount", **account}], binding["metadata"]["name"]


def test_the_daemonset_lands_on_the_gpu_nodes_and_stays_on_a_node_it_tainted() -> None:
    pod = _one("kube_node_checks.yaml", "DaemonSet")["spec"]["template"]["spec"]
    key, value = role_defaults.gpu_label().split("=")
    assert pod["nodeSelector"] == {key: value}
    tolerated = {t["key"] for t in pod["tolerations"] if t["operator"] == "Exists" and t["effect"] == "NoSchedule"}
    assert node_condition.taint_key() in tolerated  # else a tainted node could not be cleared by its own pod
    assert "nvidia.com/gpu" in tolerated
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["GPUREADY_TAINT"]["value"] == "false"  # opt-in
    assert "nvidia.com/gpu" not in str(container.get("resources"))  # holds no GPU a workload could use
    assert container["image"] == Kubernetes().node_checks_image  # the image --through kubernetes runs too
    script = container["args"][0]
    assert script.index('rm -f "$verdict"') < script.index("validate this-node") < script.index("node-condition")


def test_the_openshift_scc_is_valid_and_granted_to_the_service_account_only() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    require(SCC_SCHEMA.is_file(), f"vendored SCC schema {SCC_SCHEMA}")
    scc = _one("kube_node_checks_openshift.yaml", "SecurityContextConstraints")
    jsonschema.validate(scc, _openapi_to_json_schema(yaml.safe_load(SCC_SCHEMA.read_text())))
    assert scc["users"] == [] and scc["groups"] == []
    pod = _one("kube_node_checks.yaml", "DaemonSet")["spec"]["template"]["spec"]
    assert scc["allowHostPID"] is pod["hostPID"] is True
    assert scc["allowPrivilegedContainer"] is pod["containers"][0]["securityContext"]["privileged"] is True
    assert not (scc["allowHostNetwork"] or scc["allowHostIPC"] or scc["allowHostPorts"])
    role = _one("kube_node_checks_openshift.yaml", "Role")
    assert role["rules"] == [
        {
            "apiGroups": ["security.openshift.io"],
            "resources": ["securitycontextconstraints"],
            "resourceNames": [scc["metadata"]["name"]],
            "verbs": ["use"],
        }
    ]
    assert role["metadata"]["namespace"] == pod_namespace()


def pod_namespace() -> str:
    return str(_one("kube_node_checks.yaml", "DaemonSet")["metadata"]["namespace"])


def test_the_manifests_ship_in_the_wheel() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"gpuready.core.platforms" = ["kube_rbac.yaml", "kube_node_checks*.yaml"]' in pyproject


@pytest.mark.parametrize("version", VERSIONS)
def test_the_acceptance_pod_is_valid_kubernetes_and_pinned_to_its_node(version: str) -> None:
    import kubernetes_validate

    from gpuready.validate.node.kube_pods import node_checks_pod

    pod = node_checks_pod("stor1.r5a.local", Kubernetes().node_checks_image, "r1", "full", 120)
    kubernetes_validate.validate(pod, version, strict=True)
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["stor1.r5a.local"]}]}
    ]
    assert node_condition.taint_key() in {t["key"] for t in pod["spec"]["tolerations"]}
    [container] = pod["spec"]["containers"]
    assert container["command"][-2:] == ["--verdict", "-"] and "$(NODE_NAME)" in container["command"]
    assert "resources" not in container  # no nvidia.com/gpu held
    # PID 1 is the host's init, as in the DaemonSet: the checks tell their container from the host (and the SCC
    # the docs grant the namespace's service account allows it)
    scc = _one("kube_node_checks_openshift.yaml", "SecurityContextConstraints")
    assert pod["spec"]["hostPID"] is scc["allowHostPID"] is True
