"""Which GPU processes are a training worker's own, decided from real /proc data: a worker in its own PID
namespace (as in a pod) must never name itself as the other process on its GPU, and where the root namespace's
pids can be read it tells itself and its children from a stranger.

NVML is not here: the "after the run" process list is the real H100 capture's (tests/fixtures/gpu/compute-apps),
with its three pids replaced by the worker's host pid, its child's and this test's (a process outside the
namespace), as NVML names them (in the root PID namespace: NVIDIA/nvidia-docker#1483)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.workloads import gpu_sharing
from tests.conftest import ROOT, require

APPS = ROOT / "tests" / "fixtures" / "gpu" / "compute-apps" / "h100-80gb-hbm3-590.48.01-load.csv"
UUID = "00000000-0000-0000-0000-000000000000"

#: The worker's side, run in the new namespace: start a child (as a DataLoader or a compiler would), say ready,
#: read what NVML listed, and decide with the real functions.
WORKER = f"""
import json, os, subprocess, sys
from gpuready.workloads import gpu_sharing
child = subprocess.Popen(["sleep", "60"])
print("ready", flush=True)
after = gpu_sharing.parse_compute_apps(sys.stdin.read())
ours = gpu_sharing.own_pids()
shared = gpu_sharing.others({{}}, after, {UUID!r}, ours)
print(json.dumps({{
    "getpid": os.getpid(),
    "ours": None if ours is None else sorted(ours),
    "named": [p["pid"] for p in shared["processes"]],
    "own_pids": shared["own_pids"],
    "old_rule": [p["pid"] for p in after if p["pid"] != os.getpid()],
}}), flush=True)
child.kill()
"""


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def _worker(*unshare: str) -> tuple[dict, int, int]:
    """Run WORKER (under ``unshare`` when given); return its answer, its host pid and its child's host pid."""
    command = [sys.executable, "-c", WORKER]
    proc = subprocess.Popen(
        ["unshare", *unshare, *command] if unshare else command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        # unshare --fork's child is the worker, as the root namespace sees it
        (worker,) = _children(proc.pid) if unshare else (proc.pid,)
        (child,) = _children(worker)
        rows = APPS.read_text().splitlines()
        pids = {"11327": worker, "11328": child, "11345": os.getpid()}
        listed = [rows[0]] + [", ".join(str(pids.get(cell, cell)) for cell in row.split(", ")) for row in rows[1:]]
        out, _ = proc.communicate("\n".join(listed) + "\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return json.loads(out), worker, child


@pytest.fixture
def unshare() -> None:
    require(os.geteuid() == 0 and shutil.which("unshare"), "needs root and unshare (util-linux) for PID namespaces")


@pytest.mark.usefixtures("unshare")
def test_a_worker_in_its_own_pid_namespace_and_proc_never_names_itself() -> None:
    answer, worker, _ = _worker("--pid", "--fork", "--mount-proc")
    # the pod's view: the worker is pid 1 there, NVML lists it by its host pid, and comparing with os.getpid()
    # (the rule before) names the worker itself as the other process
    assert answer["getpid"] == 1 and worker != 1
    assert worker in answer["old_rule"]
    # it cannot know its host pid from there, so it names no process of the run's end that may be itself
    assert answer["ours"] is None and answer["own_pids"] == "unknown (own PID namespace and /proc)"
    assert answer["named"] == []


@pytest.mark.usefixtures("unshare")
def test_a_worker_in_its_own_pid_namespace_under_the_hosts_proc_never_names_itself_either() -> None:
    answer, worker, _ = _worker("--pid", "--fork")
    assert answer["getpid"] == 1 and worker in answer["old_rule"]
    # /proc shows its host pid, but from below, the kernel will not show whether /proc is the root namespace's
    # (it may be a container's): unknown, so nothing at the run's end is named
    assert answer["ours"] is None and answer["named"] == []


def test_a_worker_in_the_root_namespace_tells_itself_and_its_child_from_a_stranger() -> None:
    require(
        os.stat("/proc/self/ns/pid").st_ino == gpu_sharing.ROOT_PID_NAMESPACE,
        "this test runs in a PID namespace of its own",
    )
    answer, worker, child = _worker()
    assert answer["getpid"] == worker
    assert {worker, child} <= set(answer["ours"]) and os.getpid() not in answer["ours"]
    assert answer["named"] == [os.getpid()]  # only the process that is not the worker's
    assert answer["own_pids"] == "known"


def test_what_was_on_the_gpu_before_the_worker_is_named_even_when_it_cannot_tell_its_own() -> None:
    before = {"apps": gpu_sharing.parse_compute_apps(APPS.read_text()), "load": {}}
    shared = gpu_sharing.others(before, [], UUID, None)
    assert [(p["pid"], p["seen"]) for p in shared["processes"]] == [
        (11327, "before the run"),
        (11328, "before the run"),
        (11345, "before the run"),
    ]
    assert gpu_sharing.others(before, [], "11111111-0000-0000-0000-000000000000", None)["processes"] == []
