"""`validate gpu-node --through kubernetes` on a lab of many kwok GPU nodes: all the node-checks pods start at once,
and every node must still be judged by the verdict its own pod printed, read from that pod's log through the API
server and kwok.

At 1000 nodes the lab's log pointer (kube_devices) fell behind kwok, which ended pods before their logs were
pointed, so most nodes had no verdict. A test cannot afford 1000 nodes (benchmarks/gpu_node_kube.py runs them), so
here the pointer is held still while the pods start, as if it were behind: no pod may end before its log is served,
and once the pointer runs again every node must get its own verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuready.lab import kwok as kwok_config
from tests.conftest import ROOT, ModuleTmp
from tests.integration.kubernetes.conftest import LabCluster, eventually
from tests.integration.kubernetes.test_gpu_node_through_kubernetes import _by_host, _gpu_nodes
from tests.integration.kubernetes.test_node_conditions import this_node

pytestmark = [pytest.mark.root, pytest.mark.slow]
NODES = 60
PLACEHOLDER = "gpuready-test-node"


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[LabCluster]:
    cluster = LabCluster(module_tmp("many"), f"nodes={NODES}")
    yield cluster
    cluster.down()


def _printed(tmp_path: Path, profile: str) -> tuple[list[str], set[str]]:
    """The log lines of `validate this-node` on a replayed ``profile`` (node name a placeholder), and the ids of
    the checks it failed."""
    done = this_node(tmp_path, profile, PLACEHOLDER)
    failed = {c["id"] for c in json.loads(done.stdout)["checks"] if c["status"] == "failed"}
    return [*done.stdout.splitlines(), *done.stderr.splitlines()], failed


@contextlib.contextmanager
def log_pointer_paused(lab: LabCluster) -> Iterator[None]:
    """The lab's log pointer (kube_devices) stopped: what it does at 1000 pods when it falls behind kwok."""
    (pid,) = (p for p in lab.state["pids"] if b"gpuready.lab.kube_devices" in Path(f"/proc/{p}/cmdline").read_bytes())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _node_checks_pods(lab: LabCluster) -> list[dict]:
    return lab.kubectl.json("get", "pods", "-n", "gpuready-validation", "-l", "gpuready.io/test=node-checks")["items"]


def test_every_node_is_judged_by_its_own_pods_verdict_when_all_pods_start_at_once(
    lab: LabCluster, tmp_path: Path
) -> None:
    nodes = _gpu_nodes(lab)
    assert len(nodes) == NODES
    healthy, _ = _printed(tmp_path, "h100-x8")
    faulty, failed = _printed(tmp_path, "ecc-errors")
    assert failed
    # Every third node printed the faulty verdict: a log served for the wrong pod shows as the wrong checks failing.
    bad = set(nodes[::3])
    folder = Path(lab.state["node_verdicts"])
    for node in nodes:
        lines = faulty if node in bad else healthy
        (folder / f"{node}.log").write_text(kwok_config.cri_log([line.replace(PLACEHOLDER, node) for line in lines]))

    artifacts = tmp_path / "runs"
    argv = [sys.executable, "-m", "gpuready.core.cli", "validate", "gpu-node", "--through", "kubernetes"]
    with log_pointer_paused(lab):
        run = subprocess.Popen(
            [*argv, "-i", lab.inventory, "--artifacts", str(artifacts)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            started = ("Running", "Succeeded", "Failed")
            eventually(
                lambda: sum(p["status"].get("phase") in started for p in _node_checks_pods(lab)) == NODES,
                timeout=120,
                what=f"{NODES} node-checks pods started",
            )
            time.sleep(3)  # kwok's Stage would end a pod 1 s after it runs, were it not waiting for the pod's log
            phases = Counter(p["status"].get("phase") for p in _node_checks_pods(lab))
            # An ended pod is read and deleted by the run at once: gone pods ended too.
            assert phases == {"Running": NODES}, f"pods while no log was served: {dict(phases)}"
        except BaseException:
            run.kill()
            raise
    _, err = run.communicate(timeout=300)
    assert run.returncode == 1, err
    (summary,) = artifacts.glob("*/summary.json")
    hosts = _by_host(json.loads(summary.read_text()))
    assert set(hosts) == set(nodes)
    unread = sorted(h for h, c in hosts.items() if c["kubernetes.node_checks_pod"]["status"] != "passed")
    assert not unread, f"{len(unread)} of {NODES} nodes without their verdict, e.g. {unread[0]}: {hosts[unread[0]]}"
    for node, checks in hosts.items():
        assert {i for i, c in checks.items() if c["status"] == "failed"} == (failed if node in bad else set()), node
    # Each pod's Logs object belongs to its pod: the run deleted the pods, the garbage collector the Logs.
    eventually(
        lambda: not lab.kubectl.json("get", "logs.kwok.x-k8s.io", "-n", "gpuready-validation")["items"],
        timeout=60,
        what="the node-checks pods' Logs objects to go with their pods",
    )
