"""`gpuready lab up --components nodes`: namespace hosts a user can validate, and `lab down` removes them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready, require
from tests.integration.node.conftest import can_make_namespaces
from tests.lab_hints import run_hints

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
    # each host's process is the unshare whose PID namespace the host's sshd is PID 1 of
    assert "nodes: stopping 2 process(es) (unshare x2) and 2 network namespace(s)" in down.stderr
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


def test_every_hint_lab_up_prints_runs_as_printed(tmp_path: Path) -> None:
    require(can_make_namespaces() and shutil.which("ssh"), "needs root, `ip netns` and ssh")
    lab = ["--lab-dir", str(tmp_path / "lab")]
    up = gpuready(
        "lab", "up", "--components", "nodes", "--set", "nodes.profiles=nouveau,v100-x4,h100-x8",
        "--set", f"nodes.prefix=gh{os.getpid() % 100000}", *lab,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        ran = run_hints(up.stderr, tmp_path)
        assert len(ran) == 3, up.stderr
        for line, done in ran:
            said = done.stdout + done.stderr
            assert "replay: no recording" not in said, line
            if line.startswith("gpuready validate gpu-node"):
                assert done.returncode == 1, said  # the nouveau host's fault
            else:
                assert done.returncode == 0, f"{line}\n{said}"
        [validated] = tmp_path.glob("gpuready-runs/*validate-gpu-node/summary.json")
        failed = {c["host"] for c in json.loads(validated.read_text())["checks"] if c["status"] == "failed"}
        assert failed == {"nouveau-00"}
        preflight = next(d for line, d in ran if "--tags preflight" in line)
        [summary] = tmp_path.glob("gpuready-runs/*provision-cluster/summary.json")
        checks = json.loads(summary.read_text())["checks"]
        gpus = {c["host"]: c["message"] for c in checks if c["id"] == "preflight.gpus"}
        assert set(gpus) == {"nouveau-00", "v100-x4-01", "h100-x8-02"}, preflight.stdout
        assert all(" NVIDIA GPUs on the PCI bus, as node class " in m for m in gpus.values()), gpus
        assert not any(c["status"] == "changed" for c in checks)
        [(_, smi)] = [(line, d) for line, d in ran if line.startswith("ssh ")]
        assert smi.stdout.count("Tesla V100-SXM2-32GB") == 4, smi.stdout  # the first host nvidia-smi answers on
    finally:
        down = gpuready("lab", "down", *lab)
    assert down.returncode == 0, down.stderr
