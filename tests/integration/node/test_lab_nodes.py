"""`gpuready lab up --components nodes`: namespace hosts a user can validate, and `lab down` removes them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready, require
from tests.integration.node.conftest import can_make_namespaces

pytestmark = [pytest.mark.root, pytest.mark.slow]


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout


def test_lab_up_validate_down(tmp_path: Path) -> None:
    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    lab = ["--lab-dir", str(tmp_path / "lab")]
    prefix = f"gu{os.getpid() % 100000}"
    up = gpuready(
        "lab",
        "up",
        "--components",
        "nodes",
        "--set",
        "nodes.profiles=v100-x4,throttle",
        "--set",
        f"nodes.prefix={prefix}",
        *lab,
    )
    try:
        assert up.returncode == 0, up.stderr
        inventory = up.stdout.strip().splitlines()[-1]
        assert Path(inventory, "hosts.yml").is_file()
        assert f"{prefix}-0" in namespaces() and f"{prefix}-1" in namespaces()
        status = gpuready("lab", "status", *lab)
        assert "nodes: 2 hosts on 10.213." in status.stdout
        done = gpuready("validate", "gpu-node", "-i", inventory, "--artifacts", str(tmp_path / "runs"))
        assert done.returncode == 1  # the throttling host fails gpu.throttle
        assert "throttle-01" in done.stdout and "hw_thermal_slowdown" in done.stdout
    finally:
        down = gpuready("lab", "down", *lab)
    assert down.returncode == 0, down.stderr
    assert "nodes: stopping 2 process(es) (sshd x2) and 2 network namespace(s)" in down.stderr
    assert prefix not in namespaces()
    assert f"{prefix}br" not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout


def test_unknown_profile_is_bad_input(tmp_path: Path) -> None:
    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    done = gpuready(
        "lab", "up", "--components", "nodes", "--set", "nodes.profiles=v100-x9", "--lab-dir", str(tmp_path / "lab")
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gpuready: error: nodes.profiles: unknown profile")


def test_lab_nodes_without_root_says_so_in_one_line(tmp_path: Path) -> None:
    require(os.geteuid() == 0 and shutil.which("setpriv"), "needs root (to drop to nobody) and setpriv")
    tmp_path.chmod(0o777)
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "gpuready.core.cli",
            "lab",
            "up",
            "--components",
            "nodes",
            "--lab-dir",
            str(tmp_path / "lab"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "gpuready: error: lab component 'nodes' needs root (network namespaces); run it as root"
    ]


def test_down_kills_a_host_whose_pid_was_never_noted() -> None:
    # A cancel can land after a host's process was forked and before up_hosts noted its pid: the
    # namespace, noted first, is what finds it.
    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    from gpuready.lab import nodes

    prefix = f"gk{os.getpid() % 100000}"
    ns = f"{prefix}-0"
    state = {"prefix": prefix, "namespaces": [ns], "pids": [], "hosts": []}
    subprocess.run(["ip", "netns", "add", ns], check=True)
    orphan = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.strip():
            assert time.monotonic() < deadline, "the sleep never entered its namespace"
        nodes.down_hosts(state)
        assert orphan.wait(timeout=10) == -9
        assert ns not in namespaces()
    finally:
        orphan.kill()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
