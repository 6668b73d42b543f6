"""A `provision cluster` without tags against the lab's real Kubernetes control plane: every play of
site.yml is run. kwok's GPU nodes are in the inventory's kube_only_nodes group (no operating system to
provision), so the host layers match no host and only the Kubernetes layer changes anything; a second
run changes nothing and `validate cluster` passes. Read back with kubectl.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.kubernetes.conftest import LabCluster

pytestmark = pytest.mark.slow
SITE_PLAYS = [play["name"] for play in yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())]


def plays_and_hosts(runs: Path) -> dict[str, set[str]]:
    """Each play of the latest run and the hosts it ran tasks on, from ansible-runner's events."""
    run = sorted(p for p in runs.iterdir() if p.is_dir())[-1]
    seen: dict[str, set[str]] = {}
    for path in run.glob("ansible/artifacts/*/job_events/*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event["event"] == "playbook_on_play_start":
            seen.setdefault(data["play"], set())
        elif event["event"].startswith("runner_on_") and data.get("host"):
            seen.setdefault(data["play"], set()).add(data["host"])
    return seen


@pytest.fixture
def removed_after(lab: LabCluster, tmp_path: Path) -> Iterator[None]:
    """The shared lab as it was, once the test is done."""
    yield
    lab.run("provision", "cluster", "--remove", artifacts=tmp_path / "restore")
    lab.forget_removed_plugin()


def test_provision_without_tags_then_again_then_validate(lab: LabCluster, tmp_path: Path, removed_after: None) -> None:
    hosts = yaml.safe_load((Path(lab.inventory) / "hosts.yml").read_text())
    nodes = sorted(hosts["gpu_nodes"]["children"]["kube_only_nodes"]["hosts"])

    rc, out, err, summary = lab.run("provision", "cluster", artifacts=tmp_path)
    assert rc == 0, out + err
    plays = plays_and_hosts(tmp_path)
    # Every play of site.yml started; only the Kubernetes play had a host (the API, reached locally).
    assert sorted(plays) == sorted(SITE_PLAYS), plays
    assert {play: h for play, h in plays.items() if h} == {
        "Kubernetes | GPU node labels, the NVIDIA device plugin and, on OpenShift, its SCC": {"lab-kube-api"}
    }
    assert summary["metrics"]["changed"] > 0
    labelled = lab.kubectl.json("get", "nodes", "-l", "openshift.com/gpu-accelerator=true")["items"]
    assert sorted(n["metadata"]["name"] for n in labelled) == nodes
    lab.kubectl.run("-n", "kube-system", "get", "daemonset", "nvidia-device-plugin-daemonset")

    rc, out, err, summary = lab.run("provision", "cluster", artifacts=tmp_path)
    assert rc == 0, out + err
    assert summary["metrics"]["changed"] == 0

    rc, out, err, summary = lab.run("validate", "cluster", artifacts=tmp_path)
    assert rc == 0, out + err
    assert {c["status"] for c in summary["checks"]} <= {"passed", "skipped"}
