"""The lab's real Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok), driven
as a user does (`gpuready lab up`), and kubectl as the independent client that reads it back."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import gpuready, require
from tests.processes import Child, leftovers


def require_go() -> None:
    from gpuready.lab.gobuild import GO_FALLBACK

    require(shutil.which("go") or GO_FALLBACK.exists(), "Go (the lab builds Kubernetes and kwok from their modules)")


class Kubectl:
    """kubectl of the lab's release, as the lab's administrator (or as ``kubeconfig``'s user)."""

    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig

    def run(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.binary, "--kubeconfig", self.kubeconfig, *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def as_user(self, kubeconfig: str) -> Kubectl:
        return Kubectl(self.binary, kubeconfig)


class LabCluster:
    def __init__(self, root: Path, *settings: str) -> None:
        require_go()
        self.root = root
        args = [arg for s in settings for arg in ("--set", f"kubernetes.{s}")]
        up = gpuready("lab", "up", "--components", "kubernetes", "--lab-dir", str(root), *args, timeout=3600)
        assert up.returncode == 0, up.stderr
        self.inventory = up.stdout.strip().splitlines()[-1]
        self.state = json.loads((root / "state.json").read_text())["kubernetes"]
        self.kubectl = Kubectl(self.state["kubectl"], self.state["admin_kubeconfig"])

    def run(self, *args: str, artifacts: Path, inventory: str | Path | None = None) -> tuple[int, str, str, dict]:
        r = gpuready(*args, "-i", str(inventory or self.inventory), "--artifacts", str(artifacts), timeout=600)
        runs = sorted(artifacts.glob("*/summary.json"))
        summary = json.loads(runs[-1].read_text()) if runs else {}
        return r.returncode, r.stdout, r.stderr, summary

    def test_pods(self) -> list[dict]:
        return self.kubectl.json("get", "pods", "-n", "gpuready-validation")["items"]

    def down(self) -> None:
        gpuready("lab", "down", "--lab-dir", str(self.root), timeout=120)


def eventually(probe: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def lab_up_midway(lab: Path, env: dict[str, str]) -> Child:
    """`lab up --components kubernetes` in its own session, returned once the control plane runs (the
    controller-manager starts after the API server answers) but before `lab up` has finished."""
    up = Child(["lab", "up", "--components", "kubernetes", "--lab-dir", str(lab)], env)
    started = lab / "kubernetes" / "logs" / "kube-controller-manager.log"
    try:
        eventually(
            lambda: started.exists() or up.proc.poll() is not None,
            timeout=600,
            what="the controller-manager to start",
        )
        assert up.proc.poll() is None, f"lab up ended before the control plane ran: {up.stderr}"
    except BaseException:  # nothing of a lab that never got there may outlive the test
        for line in [f"{up.proc.pid}:", *leftovers(env, settle=0)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split(":")[0]), signal.SIGKILL)
        raise
    return up
