"""Ctrl-C and SIGTERM stop everything the run started and still write what finished.

Each test runs the real command line in a child process, signals it mid-run, and then reads the
process table: no process of the run may remain, not only the exit code must be right.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready, require
from tests.playbooks import site, wait_until_task_runs, waiting_play
from tests.processes import Child, leftovers, new_mark
from tests.unit.core.test_bad_inputs import make_inventory, with_settings

pytestmark = pytest.mark.slow

LOCAL = ROOT / "inventories" / "local"
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _summary(runs: Path) -> dict:
    [path] = list(runs.glob("*/summary.json"))
    folder = path.parent
    assert (folder / "junit.xml").is_file() and (folder / "report.md").is_file()
    return json.loads(path.read_text())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_provision_cancel_stops_ansible_playbook_and_reports(sig: int, tmp_path: Path) -> None:
    playbooks = site(tmp_path, waiting_play({"minutes": 30}))
    runs = tmp_path / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(playbooks), **new_mark()}
    child = Child(["provision", "cluster", "-i", str(LOCAL), "--artifacts", str(runs)], env)
    wait_until_task_runs(child, runs)
    assert any("ansible-playbook" in p for p in leftovers(env, settle=0)), "the playbook was not running"
    child.signal_and_wait(sig, limit=15)
    assert leftovers(env) == [], "processes of the run left behind"
    assert child.proc.returncode == EXIT[sig], child.stderr
    assert "Traceback" not in child.stderr
    summary = _summary(runs)
    assert summary["status"] == "error"
    assert ("SIGTERM" if sig == signal.SIGTERM else "Ctrl-C") in summary["aborted"]
    [apply] = [c for c in summary["checks"] if c["id"] == "provision.apply"]
    assert apply["host"] == "localhost" and apply["status"] == "error" and "cancelled" in apply["message"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_validate_gpu_node_cancel_returns_at_once_with_finished_hosts(
    sig: int, tmp_path: Path, hanging_inventory: Path
) -> None:
    inv = hanging_inventory
    runs = tmp_path / "runs"
    env = new_mark()
    child = Child(["validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), "--host-timeout", "600"], env)
    child.wait_for("here: ")
    # The hanging host's ssh starts beside the local host's checks, not necessarily before they end.
    deadline = time.monotonic() + 60
    while not any("ssh" in p for p in leftovers(env, settle=0)):
        assert time.monotonic() < deadline and child.proc.poll() is None, "the hanging host's ssh never started"
        time.sleep(0.1)
    child.signal_and_wait(sig, limit=3)
    assert leftovers(env) == [], "processes of the run left behind"
    assert child.proc.returncode == EXIT[sig], child.stderr
    assert "Traceback" not in child.stderr
    summary = _summary(runs)
    by_host: dict[str, list[dict]] = {}
    for check in summary["checks"]:
        by_host.setdefault(check["host"], []).append(check)
    assert len(by_host["here"]) > 1, "the finished host's checks were not written"
    [hung] = by_host["hangs"]
    assert hung["status"] == "error" and "before this host finished" in hung["message"]
    assert "aborted" in summary


def test_validate_training_cancel_leaves_no_worker(tmp_path: Path) -> None:
    require(
        importlib.util.find_spec("tensorflow") and importlib.util.find_spec("horovod"),
        "needs the train extra (make .venv/.stamp-train)",
    )
    runs = tmp_path / "runs"
    env = new_mark()
    child = Child(
        [
            "validate",
            "training",
            "-i",
            str(LOCAL),
            "--artifacts",
            str(runs),
            "--launcher",
            "local",
            "--gpus",
            "2",
            "--steps",
            "100000",
            "--image-size",
            "32",
            "--batch-size",
            "2",
            "--cpu",
        ],
        env,
    )
    deadline = time.monotonic() + 120
    while sum("gpuready.workloads.tensorflow.train" in p for p in leftovers(env, settle=0)) < 2:
        assert time.monotonic() < deadline and child.proc.poll() is None, child.stderr
        time.sleep(0.2)
    child.signal_and_wait(signal.SIGINT, limit=10)
    assert leftovers(env) == [], "worker processes left behind"
    assert child.proc.returncode == 130, child.stderr
    assert "Traceback" not in child.stderr
    assert "cancelled" in _summary(runs)["aborted"]


def test_lab_up_cancelled_leaves_no_half_started_component(tmp_path: Path) -> None:
    from gpuready.lab import nodes
    from tests.integration.node.conftest import can_make_namespaces

    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    require(not nodes.missing_tools(), f"missing tools: {nodes.missing_tools()} (scripts/install-system-deps)")
    lab_dir = tmp_path / "lab"
    prefix = f"gc{os.getpid() % 100000}"
    env = new_mark()
    # Twelve hosts, so that the first one's sshd answers while the others are still being made: the
    # signal lands mid-start however loaded the machine is (a scan of the process table was too slow).
    profiles = ",".join(["v100-x4"] * 12)
    child = Child(
        [
            "lab",
            "up",
            "--components",
            "nodes",
            "--set",
            f"nodes.profiles={profiles}",
            "--set",
            f"nodes.prefix={prefix}",
            "--lab-dir",
            str(lab_dir),
        ],
        env,
    )
    try:
        deadline = time.monotonic() + 120
        while not ((first := _first_lab_address(lab_dir)) and _answers(first, 22)):
            assert time.monotonic() < deadline and child.proc.poll() is None, child.stderr
            time.sleep(0.02)
        assert child.proc.poll() is None, "lab up finished before it could be cancelled"
        child.signal_and_wait(signal.SIGTERM, limit=20)
        left = leftovers(env)
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        bridge = subprocess.run(["ip", "link", "show", f"{prefix}br"], capture_output=True, text=True).returncode
    finally:
        _force_clean(env, prefix)
    assert left == [], "processes of the half-started component left behind"
    assert f"{prefix}-" not in namespaces, namespaces
    assert bridge != 0, "the lab bridge was left behind"
    assert child.proc.returncode == 143, child.stderr
    assert "Traceback" not in child.stderr
    state = lab_dir / "state.json"
    assert not state.exists() or "nodes" not in json.loads(state.read_text())
    down = gpuready("lab", "down", "--lab-dir", str(lab_dir))
    assert down.returncode == 0, down.stderr


def _first_lab_address(lab_dir: Path) -> str | None:
    """The first lab host's address, from the hosts file lab up writes before it starts any host."""
    from gpuready.lab.nodes import HOSTS_MARK

    for path in lab_dir.rglob("etc-hosts"):
        _, marked, ours = path.read_text().partition(HOSTS_MARK)
        if marked:
            return next(iter(ours.split()), None)
    return None


def _answers(address: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=0.2):
        return True
    return False


def _force_clean(env: dict[str, str], prefix: str) -> None:
    """Whatever a failing run left: its processes, namespaces and bridge (so one failure does not leak)."""
    for line in leftovers(env, settle=0):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    for name in (line.split()[0] for line in listed if line.startswith(f"{prefix}-")):
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    subprocess.run(["ip", "link", "delete", f"{prefix}br"], capture_output=True)


def test_validate_gpu_node_host_given_up_at_its_deadline_leaves_nothing_running(tmp_path: Path) -> None:
    # A node without timeout(1) (a minimal image) whose nvidia-smi hangs: nothing on the node bounds the batch,
    # and gpuready gives the host up at --host-timeout. Its session's input then ends, and the batch's watchdog
    # stops the hung command (here the node is this machine, reached by the local connection).
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "mktemp", "rm", "cat", "sleep"):
        found = shutil.which(tool)
        require(found is not None, f"no {tool}")
        (tools / tool).symlink_to(found)
    (tools / "nvidia-smi").write_text("#!/bin/sh\nsleep 600\n")
    (tools / "nvidia-smi").chmod(0o755)
    hosts = {"gpu_nodes": {"hosts": {"stalls": {"ansible_connection": "local"}}}}
    inv = make_inventory(tmp_path, hosts=hosts, settings=with_settings(node_classes__v100__gpu_count=0))
    env = {**new_mark(), "PATH": str(tools)}
    started = time.monotonic()
    child = Child(
        ["validate", "gpu-node", "-i", str(inv), "--artifacts", str(tmp_path / "runs"), "--host-timeout", "4"], env
    )
    child.proc.wait(timeout=60)
    child.reader.join(5)
    assert time.monotonic() - started < 30
    assert child.proc.returncode == 3, child.stderr
    [given_up] = _summary(tmp_path / "runs")["checks"]
    assert given_up["status"] == "error" and "gave up on this host" in given_up["message"], given_up
    assert leftovers(env, settle=10) == [], "the hung command was left running"
