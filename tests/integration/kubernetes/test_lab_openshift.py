"""OpenShift: the device plugin's pods are admitted only through the SCC gpuready creates and binds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.kubernetes.test_lab_cluster import LabCluster

pytestmark = pytest.mark.slow


def test_openshift_scc_binding_lets_the_plugin_run_and_validate_pass(tmp_path: Path) -> None:
    lab = LabCluster(tmp_path / "lab", flavour="openshift")
    try:
        # The emulated OpenShift admits the plugin's pods (host path volume) only through an SCC that binds them.
        rc, _, err, summary = lab.run("provision", "cluster", "--tags", "kubernetes", artifacts=tmp_path / "runs")
        assert rc == 0, err
        scc = lab.http("GET", "/apis/security.openshift.io/v1/securitycontextconstraints/"
                              "gpuready-nvidia-device-plugin").json()
        assert scc["users"] == ["system:serviceaccount:kube-system:nvidia-device-plugin"]
        pods = lab.http("GET", "/api/v1/namespaces/kube-system/pods").json()["items"]
        assert {p["metadata"]["annotations"]["openshift.io/scc"] for p in pods} == {"gpuready-nvidia-device-plugin"}
        rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path / "runs")
        assert rc == 0, out + err
        checks = {(c["id"], c["host"]): c for c in summary["checks"]}
        assert checks[("cluster.openshift.scc", "cluster")]["status"] == "passed"
        # --remove takes the SCC away again.
        rc, _, err, _ = lab.run("provision", "cluster", "--tags", "kubernetes", "--remove",
                                artifacts=tmp_path / "runs")
        assert rc == 0, err
        assert lab.http("GET", "/apis/security.openshift.io/v1/securitycontextconstraints/"
                               "gpuready-nvidia-device-plugin").status_code == 404
    finally:
        lab.down()


def test_plugin_pods_are_refused_without_the_scc(tmp_path: Path) -> None:
    lab = LabCluster(tmp_path / "lab", flavour="openshift")
    try:
        ns = "/api/v1/namespaces/kube-system"
        lab.http("POST", f"{ns}/serviceaccounts", {"metadata": {"name": "nvidia-device-plugin"}}).raise_for_status()
        ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dp", "namespace": "kube-system"},
              "spec": {"selector": {"matchLabels": {"name": "dp"}}, "template": {
                  "metadata": {"labels": {"name": "dp"}},
                  "spec": {"serviceAccountName": "nvidia-device-plugin", "nodeSelector": {"kubernetes.io/os": "linux"},
                           "containers": [{"name": "c", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}],
                           "volumes": [{"name": "dp", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]}}}}
        lab.http("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", ds).raise_for_status()
        deadline = time.monotonic() + 10
        events: list[str] = []
        while time.monotonic() < deadline and not events:
            events = [e["message"] for e in lab.http("GET", f"{ns}/events").json()["items"]
                      if e["reason"] == "FailedCreate"]
            time.sleep(0.1)
        assert events and "unable to validate against any security context constraint" in events[0]
        assert json.dumps(lab.http("GET", f"{ns}/pods").json()["items"]) == "[]"
    finally:
        lab.down()
