"""`validate gpu-node --through kubernetes` against the lab's real control plane, as gpuready's least-privilege
user: one pod per GPU node, pinned by the scheduler, run by kwok, its log (kwok's Logs) the node verdict that
`validate this-node` wrote on a replayed GPU for that node. Read back with kubectl as the admin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.lab import kwok as kwok_config
from tests.integration.kubernetes.conftest import LabCluster
from tests.integration.kubernetes.test_node_conditions import this_node

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def verdicts(lab: LabCluster) -> Iterator[Path]:
    """The lab's folder of node verdicts the node-checks pods print; emptied again afterwards."""
    folder = Path(lab.state["node_verdicts"])
    yield folder
    for path in folder.glob("*.log"):
        path.unlink()


def _gpu_nodes(lab: LabCluster) -> list[str]:
    hosts = yaml.safe_load((Path(lab.inventory) / "hosts.yml").read_text())
    return sorted(hosts["gpu_nodes"]["children"]["kube_only_nodes"]["hosts"])


def _print_verdict(tmp_path: Path, profile: str, node: str, folder: Path) -> dict[str, Any]:
    """What a node-checks pod on ``node`` logs: `validate this-node --verdict -` on a replayed ``profile``, the
    verdict on stdout and its summary line on stderr, both in the pod's log as the kubelet keeps them."""
    printed = this_node(tmp_path, profile, node)
    (folder / f"{node}.log").write_text(
        kwok_config.cri_log([*printed.stdout.splitlines(), *printed.stderr.splitlines()])
    )
    return dict(json.loads(printed.stdout))


def _by_host(summary: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    hosts: dict[str, dict[str, dict[str, Any]]] = {}
    for c in summary["checks"]:
        hosts.setdefault(c["host"], {})[c["id"]] = c
    return hosts


def test_each_node_is_judged_by_the_verdict_its_own_pod_printed(
    lab: LabCluster, verdicts: Path, tmp_path: Path
) -> None:
    bad, silent = _gpu_nodes(lab)
    printed = _print_verdict(tmp_path, "ecc-errors", bad, verdicts)
    failed = {c["id"] for c in printed["checks"] if c["status"] == "failed"}
    assert failed

    rc, _, err, summary = lab.run("validate", "gpu-node", "--through", "kubernetes", artifacts=tmp_path / "runs")
    assert rc == 1, err
    hosts = _by_host(summary)
    assert set(hosts) == {bad, silent}
    # The faulty node: exactly the checks its verdict holds, under its name, and the pod that carried them.
    assert {i for i, c in hosts[bad].items() if c["status"] == "failed"} == failed
    assert set(hosts[bad]) == {c["id"] for c in printed["checks"]} | {"kubernetes.node_checks_pod"}
    assert hosts[bad]["kubernetes.node_checks_pod"]["status"] == "passed"
    # The node whose pod printed no verdict: its checks could not run, an error, never a failure.
    assert {c["status"] for c in hosts[silent].values()} == {"error"}
    assert "not a node verdict" in hosts[silent]["kubernetes.node_checks_pod"]["message"]
    pods = lab.kubectl.json("get", "pods", "-n", "gpuready-validation", "-l", "gpuready.io/test=node-checks")
    assert pods["items"] == []  # the run deleted its pods


def test_a_verdict_of_another_node_never_stands_for_this_one(lab: LabCluster, verdicts: Path, tmp_path: Path) -> None:
    bad, other = _gpu_nodes(lab)
    _print_verdict(tmp_path, "ecc-errors", bad, verdicts)
    (verdicts / f"{other}.log").write_text((verdicts / f"{bad}.log").read_text())
    rc, _, err, summary = lab.run(
        "validate", "gpu-node", "--through", "kubernetes", "--limit", other, artifacts=tmp_path / "runs"
    )
    assert rc == 3, err  # could not run: no failure reported
    [row] = summary["checks"]
    assert (row["host"], row["id"], row["status"]) == (other, "kubernetes.node_checks_pod", "error")
    assert f"printed the verdict of {bad!r}" in row["message"]


def test_options_of_the_ssh_path_are_refused_in_one_line(lab: LabCluster, tmp_path: Path) -> None:
    rc, _, err, _ = lab.run(
        "validate", "gpu-node", "--through", "kubernetes", "--only", "gpu", artifacts=tmp_path / "runs"
    )
    assert rc == 2
    assert err.strip() == "gpuready: error: --only: not with --through kubernetes (the pods run the full set as it is)"
