"""`validate cluster` and `provision cluster --check` against the lab's real control plane, read at 80 columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.integration.kubernetes.conftest import LabCluster
from tests.verdict_shape import assert_fits, failing_lines

pytestmark = pytest.mark.slow


def run(lab: LabCluster, artifacts: Path, *args: str) -> tuple[int, list[str], str]:
    done = gpuready(*args, "-i", lab.inventory, "--artifacts", str(artifacts), env={"COLUMNS": "80"}, timeout=600)
    return done.returncode, assert_fits(done.stdout), done.stdout


def test_before_provisioning_the_verdict_fits_and_its_remedy_runs_as_printed(lab: LabCluster, tmp_path: Path) -> None:
    rc, text, stdout = run(lab, tmp_path / "runs", "validate", "cluster")
    assert rc == 1, stdout
    # One GPU-less node and two GPU nodes without the plugin yet.
    assert text[0] == "validate cluster: FAILED · 3 nodes, 2 failing"
    assert text[1] == f"inventory: {lab.inventory}"
    failing = failing_lines(text)
    # One root cause: the checks that need the plugin are counted on its line, its message names the nodes.
    assert failing["cluster.device_plugin.pod"].endswith("failed on 2 hosts; 8 skipped after it")
    assert "    stor1.lab.local, stor2.lab.local: no device-plugin pod on this node" in text
    assert "passed: infra1.lab.local" in text
    # The remedy carries this inventory: pasted, it provisions this cluster (the nodes are named above it; a
    # --limit to them would leave out the API host the Kubernetes play runs on).
    flat = " ".join(line.strip() for line in text)
    command = f"gpuready provision cluster -i {lab.inventory} --tags kubernetes"
    assert command in flat, stdout
    rc, text, stdout = run(lab, tmp_path / "plan", "provision", "cluster", "--tags", "kubernetes", "--check")
    assert rc == 0, stdout
    assert text[0] == "provision cluster (check mode): PASSED · 1 host"
