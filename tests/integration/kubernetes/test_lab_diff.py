"""`provision cluster --check --diff` against the lab's real Kubernetes control plane: every task that would
change shows its diff, one per object of a multi-document apply (the node labels per node, the service
account and the DaemonSet), without the API server's managedFields; nothing changes. Read back with kubectl."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.integration.kubernetes.conftest import LabCluster

pytestmark = pytest.mark.slow


def test_check_diff_shows_every_task_that_would_change(lab: LabCluster, tmp_path: Path) -> None:
    hosts = yaml.safe_load((Path(lab.inventory) / "hosts.yml").read_text())
    nodes = sorted(hosts["gpu_nodes"]["children"]["kube_only_nodes"]["hosts"])

    rc, out, err, summary = lab.run("provision", "cluster", "--check", "--diff", artifacts=tmp_path)
    assert rc == 0, out + err
    would_change = {task for p in summary["metrics"]["playbooks"] for t in p["changed_tasks"].values() for task in t}
    assert len(would_change) >= 2, would_change
    diffs = (sorted(p for p in tmp_path.iterdir() if p.is_dir())[-1] / "diffs.txt").read_text()
    shown = set(re.findall(r"^── (.+): \d+ host\(s\)", diffs, re.M))
    assert shown == would_change, diffs
    assert "no diff from its module" not in diffs
    for node in nodes:
        assert f"--- before: Node {node}\n+++ after: Node {node}\n" in diffs
    assert '+            "nvidia.com/gpu.present": "true"' in diffs
    assert "+++ after: DaemonSet kube-system/nvidia-device-plugin-daemonset" in diffs
    assert "managedFields" not in diffs
    # the terminal shows the same tasks, the diffs cut to a screenful
    assert set(re.findall(r"^── (.+): \d+ host\(s\)", out, re.M)) == would_change

    labelled = lab.kubectl.json("get", "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    assert labelled == []
    daemonsets = lab.kubectl.json("-n", "kube-system", "get", "daemonsets")["items"]
    assert "nvidia-device-plugin-daemonset" not in {d["metadata"]["name"] for d in daemonsets}
