"""OpenShift flavour: gpuready's SCC is admitted by a real API server against OpenShift's own SCC schema
(the CRD from github.com/openshift/api), bound to the plugin's service account, and removed again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.kubernetes.conftest import LabCluster

pytestmark = pytest.mark.slow
SCC = "gpuready-nvidia-device-plugin"


def test_openshift_scc_is_created_bound_validated_and_removed(tmp_path: Path) -> None:
    lab = LabCluster(tmp_path / "lab", "flavour=openshift")
    try:
        rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "runs")
        assert rc == 0, err
        scc = lab.kubectl.json("get", "securitycontextconstraints", SCC)
        assert scc["users"] == ["system:serviceaccount:kube-system:nvidia-device-plugin"]
        rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path / "runs")
        assert rc == 0, out + err
        checks = {(c["id"], c["host"]): c for c in summary["checks"]}
        assert checks[("cluster.openshift.scc", "cluster")]["status"] == "passed"
        rc, _, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", "--remove", artifacts=tmp_path / "runs")
        assert rc == 0, err
        assert lab.kubectl.run("get", "securitycontextconstraints", SCC, check=False).returncode != 0
    finally:
        lab.down()


def test_an_scc_outside_openshifts_schema_is_refused(tmp_path: Path) -> None:
    lab = LabCluster(tmp_path / "lab", "flavour=openshift")
    try:
        bad = {
            "apiVersion": "security.openshift.io/v1",
            "kind": "SecurityContextConstraints",
            "metadata": {"name": "incomplete"},
            "allowPrivilegedContainer": "yes",
        }
        r = lab.kubectl.run("apply", "-f", "-", check=False, stdin=json.dumps(bad))
        assert r.returncode != 0 and "allowPrivilegedContainer" in r.stderr, r.stderr
    finally:
        lab.down()
