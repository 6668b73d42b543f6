"""The lab's real Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok), driven
as a user does (`gpuready lab up`), and kubectl as the independent client that reads it back."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, gpuready, require
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

    @contextlib.contextmanager
    def without(self, *binding: str) -> Iterator[None]:
        """With one of gpuready's RBAC bindings deleted (kubectl's ``kind name [-n namespace]``); gpuready's RBAC
        applied again afterwards."""
        self.kubectl.run("delete", *binding)
        try:
            yield
        finally:
            rbac = ROOT / "core" / "platforms" / "kube_rbac.yaml"
            self.kubectl.run("apply", "--server-side", "--field-manager", "gpuready-lab", "-f", str(rbac))

    def test_pods(self) -> list[dict]:
        return self.kubectl.json("get", "pods", "-n", "gpuready-validation")["items"]

    def down(self) -> None:
        gpuready("lab", "down", "--lab-dir", str(self.root), timeout=120)

    def forget_removed_plugin(self) -> None:
        """Each node as if no device plugin had ever registered there. The kubelet keeps a resource's capacity
        once a plugin registered it, with nothing allocatable, until the node restarts (the lab's device
        stand-in does the same), so a module that removed the plugin leaves ``capacity nvidia.com/gpu: N``
        behind, which changes how ``validate cluster`` judges the next module's nodes."""

        # The stand-in takes the GPUs out of allocatable once the plugin's pods are gone (the garbage collector's
        # pace): until then a node still has them.
        def settled() -> list[dict[str, Any]] | None:
            nodes = self.kubectl.json("get", "nodes")["items"]
            allocatable = [n["status"].get("allocatable", {}).get("nvidia.com/gpu", "0") for n in nodes]
            return nodes if all(n == "0" for n in allocatable) else None

        nodes = eventually(settled, timeout=120, what="GPUs to leave allocatable on every node")
        for node in nodes:
            gone = [f for f in ("capacity", "allocatable") if "nvidia.com/gpu" in node["status"].get(f, {})]
            if gone:
                patch = [{"op": "remove", "path": f"/status/{f}/nvidia.com~1gpu"} for f in gone]
                self.kubectl.run(
                    "patch", "node", node["metadata"]["name"], "--subresource=status", "--type=json",
                    "-p", json.dumps(patch),
                )  # fmt: skip


def the_one_error(rc: int, err: str) -> str:
    """The one ``gpuready: error:`` line of a run that could not run (exit 3), without a traceback."""
    assert rc == 3, err
    errors = [line for line in err.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    return errors[0]


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


#: Kinds that record what happened rather than what is: they grow with every run and are left out of a lab's state.
HISTORY = {"events", "events.events.k8s.io"}


def lab_state(lab: LabCluster) -> dict[str, Any]:
    """What a module could leave behind in a lab: every object the API lists (but events), each node's labels,
    taints, gpuready's annotations and GPUs, and the inventory `lab up` wrote."""
    listed = lab.kubectl.run("api-resources", "--verbs=list", "-o", "name").stdout.split()
    kinds = [kind for kind in listed if kind not in HISTORY]
    state: dict[str, Any] = {}
    for item in lab.kubectl.json("get", ",".join(kinds), "-A")["items"]:
        meta = item["metadata"]
        key = f"{item['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")
        state[key] = None
        if item["kind"] == "Node":
            state[key] = {
                "labels": meta.get("labels", {}),
                "taints": item["spec"].get("taints", []),
                "annotations": {k: v for k, v in meta.get("annotations", {}).items() if k.startswith("gpuready")},
                "gpus": item["status"].get("allocatable", {}).get("nvidia.com/gpu", "0"),
                "gpu_capacity": item["status"].get("capacity", {}).get("nvidia.com/gpu", "0"),
            }
    for path in sorted(Path(lab.inventory).rglob("*")):
        if path.is_file():
            state[f"inventory {path.relative_to(lab.inventory)}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def state_changes(base: dict[str, Any], now: dict[str, Any]) -> list[str]:
    added = [f"+ {key}" for key in sorted(now.keys() - base.keys())]
    gone = [f"- {key}" for key in sorted(base.keys() - now.keys())]
    changed = [f"~ {key}: {now[key]}" for key in sorted(base.keys() & now.keys()) if base[key] != now[key]]
    return added + gone + changed


class SharedLab:
    """The session's default lab (`lab up --components kubernetes`), started when a module first asks for it,
    and the state it had then, which every module must leave it in."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.cluster: LabCluster | None = None
        self.base: dict[str, Any] = {}

    def get(self) -> LabCluster:
        if self.cluster is None:
            self.cluster = LabCluster(self.factory.mktemp("shared-lab"))
            self.base = lab_state(self.cluster)
        return self.cluster

    def changes(self, settle: float = 60) -> list[str]:
        """What differs from the base state, once the controllers had ``settle`` seconds to finish (the garbage
        collector removes a deleted DaemonSet's pods, the device stand-in the GPUs of a node without a plugin)."""
        assert self.cluster is not None
        deadline = time.monotonic() + settle
        while True:
            changes = state_changes(self.base, lab_state(self.cluster))
            if not changes or time.monotonic() > deadline:
                return changes
            time.sleep(1)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.down()
            self.cluster = None


@pytest.fixture(scope="session")
def shared_labs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedLab]:
    shared = SharedLab(tmp_path_factory)
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def lab(shared_labs: SharedLab, request: pytest.FixtureRequest) -> Iterator[LabCluster]:
    """The default lab, shared by every module of this folder that does not define its own ``lab``.

    Starting a control plane costs more than most modules' tests, so the session starts it once (the
    Kubernetes group runs on one xdist worker). A module that changes the lab puts back what it changed in
    its own fixtures' teardown; here, after them, the lab is compared with the state it had after `lab up`.
    What a module left behind fails that module, and the lab is started anew, so the next module still
    finds it as `lab up` left it. A module that breaks the lab on purpose (stopped API server, faulty
    nodes, another flavour) defines its own ``lab``."""
    yield shared_labs.get()
    left = shared_labs.changes()
    if left:
        shared_labs.close()
        pytest.fail(f"{request.module.__name__} left the shared Kubernetes lab changed: {'; '.join(left)}")
