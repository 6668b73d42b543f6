"""OpenShift flavour: gpuready's SCC is admitted by a real API server against OpenShift's own SCC schema
(the CRD from github.com/openshift/api), bound to the plugin's service account, and removed again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ModuleTmp
from tests.integration.kubernetes.conftest import LabCluster

pytestmark = pytest.mark.slow
SCC = "gpuready-nvidia-device-plugin"
# OpenShift's flavour puts the plugin in a project of its own: SCCs do not apply in kube-system.
PROJECT = "nvidia-device-plugin"
PLUGIN_SA = f"system:serviceaccount:{PROJECT}:nvidia-device-plugin"


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[LabCluster]:
    """One OpenShift-flavoured lab for the module: the first test removes what it provisions, the second
    only sends the API server an object it refuses."""
    cluster = LabCluster(module_tmp("lab"), "flavour=openshift")
    yield cluster
    cluster.down()


def _may_use(lab: LabCluster, user: str, namespace: str) -> str:
    """kubectl's own answer to: may this account `use` gpuready's SCC in this namespace."""
    r = lab.kubectl.run(
        "auth",
        "can-i",
        "use",
        f"securitycontextconstraints.security.openshift.io/{SCC}",
        "-n",
        namespace,
        "--as",
        user,
        "--as-group",
        "system:serviceaccounts",
        check=False,
    )
    return r.stdout.strip()


def test_openshift_scc_is_created_bound_validated_and_removed(lab: LabCluster, tmp_path: Path) -> None:
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "runs")
    assert rc == 0, err
    scc = lab.kubectl.json("get", "securitycontextconstraints", SCC)
    assert scc["users"] == [] and scc["allowPrivilegedContainer"] is True
    # The API server's own RBAC decides: only the plugin's service account, only in its project, may use it.
    assert _may_use(lab, PLUGIN_SA, PROJECT) == "yes"
    assert _may_use(lab, f"system:serviceaccount:{PROJECT}:default", PROJECT) == "no"
    assert _may_use(lab, PLUGIN_SA, "default") == "no"
    ds = lab.kubectl.json("get", "daemonset", "-n", PROJECT, "nvidia-device-plugin-daemonset")
    assert ds["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {"privileged": True}
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path / "runs")
    assert rc == 0, out + err
    checks = {(c["id"], c["host"]): c for c in summary["checks"]}
    assert checks[("cluster.openshift.scc", "cluster")]["status"] == "passed"
    assert checks[("cluster.openshift.scc", "cluster")]["message"] == f"{PLUGIN_SA} may use SCC {SCC} in {PROJECT}"
    # Someone deletes the RoleBinding: validate asks the API server again and fails, naming the account.
    lab.kubectl.run("delete", "rolebinding", "-n", PROJECT, SCC)
    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path / "unbound")
    scc_check = {(c["id"], c["host"]): c for c in summary["checks"]}[("cluster.openshift.scc", "cluster")]
    assert rc == 1 and scc_check["status"] == "failed", out + err
    assert scc_check["message"] == f"{PLUGIN_SA} may not use SCC {SCC} in {PROJECT}"
    rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "again")
    assert rc == 0 and _may_use(lab, PLUGIN_SA, PROJECT) == "yes", err
    rc, _, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", "--remove", artifacts=tmp_path / "runs")
    assert rc == 0, err
    assert lab.kubectl.run("get", "securitycontextconstraints", SCC, check=False).returncode != 0
    for kind in ("role", "rolebinding"):
        assert lab.kubectl.run("get", kind, "-n", PROJECT, SCC, check=False).returncode != 0


def test_an_scc_outside_openshifts_schema_is_refused(lab: LabCluster) -> None:
    bad = {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": "incomplete"},
        "allowPrivilegedContainer": "yes",
    }
    r = lab.kubectl.run("apply", "-f", "-", check=False, stdin=json.dumps(bad))
    assert r.returncode != 0 and "allowPrivilegedContainer" in r.stderr, r.stderr


def test_the_node_checks_scc_is_admitted_and_granted_to_their_service_account_only(lab: LabCluster) -> None:
    from tests.conftest import ROOT

    platforms = ROOT / "core" / "platforms"
    manifests = [platforms / "kube_node_checks.yaml", platforms / "kube_node_checks_openshift.yaml"]
    namespace = "gpuready-node-checks"
    account = f"system:serviceaccount:{namespace}:gpuready-node-checks"

    def may_use(user: str, where: str) -> str:
        scc = "securitycontextconstraints.security.openshift.io/gpuready-node-checks"
        args = ["auth", "can-i", "use", scc, "-n", where, "--as", user, "--as-group", "system:serviceaccounts"]
        return lab.kubectl.run(*args, check=False).stdout.strip()

    try:
        for manifest in manifests:
            lab.kubectl.run("create", "-f", str(manifest))  # the SCC against OpenShift's own schema
        scc = lab.kubectl.json("get", "securitycontextconstraints", "gpuready-node-checks")
        assert scc["allowHostPID"] is True and scc["users"] == [] and scc["groups"] == []
        assert may_use(account, namespace) == "yes"
        assert may_use(f"system:serviceaccount:{namespace}:default", namespace) == "no"
        assert may_use(account, "default") == "no"
    finally:
        for manifest in reversed(manifests):
            lab.kubectl.run("delete", "--ignore-not-found", "--wait", "--timeout", "120s", "-f", str(manifest))
