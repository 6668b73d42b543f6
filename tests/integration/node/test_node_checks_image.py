"""The node-checks image, built once and run as its pods run it: its own command, on replayed GPUs.

The replayed tools (gpuready.lab.replay: real nvidia-smi recordings, each fault one named field edit) are
bind-mounted at the same path and put first on PATH, as the NVIDIA runtime mounts the node's own nvidia-smi; the
profile's device files are made with mknod and passed with --device, as the runtime passes /dev/nvidia*.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gpuready.lab import replay
from gpuready.validate.node import node_verdict
from gpuready.validate.node.checks import CHECK_IDS
from gpuready.validate.node.checks.selection import ACTIVE
from tests.conftest import ModuleTmp, require
from tests.integration.node import node_checks_image

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def image(module_tmp: ModuleTmp) -> str:
    require(*node_checks_image.prerequisites())
    return node_checks_image.image(module_tmp("node-checks-image"))


def run_on_replayed(image: str, tmp_path: Path, profile: str, host: str) -> tuple[int, dict[str, Any], str]:
    """The image's own command (``validate this-node --set quick --verdict -``) on a node of ``profile``."""
    bin_dir = replay.build(profile, tmp_path / profile)
    devices = tmp_path / "dev"
    devices.mkdir()
    passed = []
    for name, major, minor, _ in replay.devices(replay.PROFILES[profile]):
        os.mknod(devices / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        passed += ["--device", f"{devices / name}:/dev/{name}"]
    done = node_checks_image.podman(
        "run",
        "--rm",
        *node_checks_image.ULIMITS,
        "--network",
        "none",
        "--hostname",
        host,
        *passed,
        "--volume",
        f"{tmp_path / profile}:{tmp_path / profile}:ro",
        "--env",
        f"PATH={bin_dir}:/opt/gpuready/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        image,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def test_the_image_finds_a_replayed_fault_with_its_check_id(image: str, tmp_path: Path) -> None:
    rc, verdict, stderr = run_on_replayed(image, tmp_path, "ecc-errors", "gn07")
    assert rc == 1, stderr
    assert verdict["schema"] == node_verdict.SCHEMA and verdict["host"] == "gn07" and verdict["set"] == "quick"
    checks = {c["id"]: c for c in verdict["checks"]}
    assert list(checks) == [i for i in CHECK_IDS if i not in ACTIVE]
    # the replayed GPUs and their device files were seen from inside the container
    assert checks["driver.nvidia_smi"]["message"] == "nvidia-smi answers (4 GPUs)"
    assert checks["gpu.pci_bus"]["status"] == "passed", checks["gpu.pci_bus"]
    assert checks["node.devices"]["status"] == "passed", checks["node.devices"]
    # the container's own device files are not the host's: their labels are not judged there, and it says why
    labels = checks["node.selinux_labels"]
    assert labels["status"] == "skipped" and "podman's /run/.containerenv is there" in labels["message"], labels
    assert checks["gpu.ecc_volatile"]["status"] == "failed" and checks["gpu.xid"]["status"] == "failed"
    assert verdict["failure"]["id"] == "gpu.ecc_volatile"
    assert "GPU 1 (00000000:1C:00.0): 2 volatile uncorrectable ECC errors" in verdict["failure"]["message"]
    assert stderr.strip().splitlines()[-1].startswith("gpuready: gn07: failed (")


def test_the_image_passes_a_healthy_replayed_node(image: str, tmp_path: Path) -> None:
    rc, verdict, stderr = run_on_replayed(image, tmp_path, "a100-x4", "gn01")
    assert rc == 0, stderr
    assert verdict["status"] == "passed" and verdict["failure"] is None and verdict["host"] == "gn01"
    assert {c["id"]: c["status"] for c in verdict["checks"]}["node.devices"] == "passed"
