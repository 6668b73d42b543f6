"""Node verdicts on Kubernetes nodes against the lab's real control plane: the periodic checks' manifests created
for real, and `validate node-condition` run as their service account (a token of it from the TokenRequest API),
with node verdicts written by `validate this-node` on replayed GPUs. Read back with kubectl as the admin.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.core import role_defaults
from gpuready.lab import kwok as kwok_config
from gpuready.lab import replay
from gpuready.lab.kubernetes import PROFILES
from tests.conftest import ROOT, ModuleTmp, gpuready, require
from tests.doc_samples import owned_block
from tests.integration.kubernetes.conftest import LabCluster, eventually

pytestmark = [pytest.mark.root, pytest.mark.slow]
PLATFORMS = ROOT / "core" / "platforms"
CONDITION = "GpureadyCheckFailed"
TAINT = "gpuready.io/validation-failed"
GPU_TAINT = "nvidia.com/gpu"
NAMESPACE = "gpuready-node-checks"
NODES = ("gpuready-cond-a", "gpuready-cond-b")


def _kubeconfig_for(lab: LabCluster, token: str, path: Path) -> Path:
    """A kubeconfig of the lab's API server (its address and CA from the admin's) with ``token`` as the user."""
    admin = yaml.safe_load(Path(lab.state["admin_kubeconfig"]).read_text())
    cluster = dict(admin["clusters"][0]["cluster"])
    ca = cluster.pop("certificate-authority", None)
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "lab", "user": "sa"}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def site(lab: LabCluster, module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    """Two GPU nodes of the lab's kind (labelled as gpuready labels GPU nodes), the node checks' manifests and
    the taint opt-in created, and a kubeconfig of the DaemonSet's service account; all taken away at the end."""
    folder = module_tmp("node-conditions")
    key, value = role_defaults.gpu_label().split("=")
    nodes = [kwok_config.node({"name": n, "profile": "t4", "fault": ""}, PROFILES["t4"]) for n in NODES]
    for n in nodes:
        n["metadata"]["labels"][key] = value
    manifests = [PLATFORMS / "kube_node_checks.yaml", PLATFORMS / "kube_node_checks_taint.yaml"]
    try:
        lab.kubectl.run("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
        for manifest in manifests:
            lab.kubectl.run("create", "-f", str(manifest))
        token = lab.kubectl.run("create", "token", NAMESPACE, "-n", NAMESPACE, "--duration", "1h").stdout.strip()
        yield {"lab": lab, "kubeconfig": _kubeconfig_for(lab, token, folder / "sa.kubeconfig"), "folder": folder}
    finally:
        for manifest in reversed(manifests):
            lab.kubectl.run("delete", "--ignore-not-found", "--wait", "--timeout", "120s", "-f", str(manifest))
        lab.kubectl.run("delete", "node", "--ignore-not-found", *NODES)


#: A node's own /dev, as the nodes lab gives its hosts: a tmpfs in a mount namespace of its own with the basic
#: devices, then the profile's device files (replay's devices.sh), so node.devices judges the replayed GPUs.
NODE_DEV = (
    "mount -t tmpfs -o mode=755 tmpfs /dev && mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 "
    '&& mknod -m 666 /dev/urandom c 1 9 && sh "$0" >/dev/null && exec "$@"'
)


def this_node(folder: Path, profile: str, node: str, *, hang: bool = False) -> subprocess.CompletedProcess[str]:
    """`validate this-node --set quick --verdict -` on a node replaying ``profile``: the verdict on stdout, its
    one-line summary on stderr; ``hang``: its nvidia-smi never answers (the budget runs out)."""
    require(os.geteuid() == 0 and shutil.which("unshare") is not None, "needs root and unshare (device files)")
    tools = replay.build(profile, folder / f"replay-{profile}")
    path = f"{tools}:{os.environ['PATH']}"
    if hang:
        hung = folder / "hung-bin"
        hung.mkdir(exist_ok=True)
        smi = hung / "nvidia-smi"
        smi.write_text("#!/bin/sh\nexec sleep 60\n")
        smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
        path = f"{hung}:{path}"
    command = [sys.executable, "-m", "gpuready.core.cli", "validate", "this-node", "--set", "quick"]
    command += ["--budget", "3", "--node-name", node, "--verdict", "-"]
    in_namespace = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NODE_DEV]
    done = subprocess.run(
        [*in_namespace, str(tools.parent / "devices.sh"), *command],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr and done.stdout.startswith("{"), done.stderr
    return done


def _verdict(folder: Path, profile: str, *, hang: bool = False) -> Path:
    verdict = folder / f"{profile}{'-hung' if hang else ''}.json"
    verdict.write_text(this_node(folder, profile, "n1", hang=hang).stdout)
    return verdict


def _condition(site: dict[str, Any], node: str) -> dict[str, Any]:
    got = site["lab"].kubectl.json("get", "node", node)
    conditions = {c["type"]: c for c in got["status"].get("conditions", [])}
    taints = {t["key"]: t for t in got["spec"].get("taints", [])}
    return {"condition": conditions.get(CONDITION), "taints": taints, "ready": conditions.get("Ready")}


def _set(site: dict[str, Any], node: str, verdict: Path, *flags: str) -> Any:
    config = str(site["kubeconfig"])
    return gpuready(
        "validate", "node-condition", "--verdict", str(verdict), "--node", node, "--kubeconfig", config, *flags
    )


def test_the_daemonset_is_created_and_runs_on_each_gpu_node_it_selects(site: dict[str, Any]) -> None:
    lab: LabCluster = site["lab"]

    def placed() -> set[str]:
        pods = lab.kubectl.json("get", "pods", "-n", NAMESPACE)["items"]
        return {p["spec"].get("nodeName") for p in pods if p["status"].get("phase") == "Running"}

    # Both nodes carry the GPU taint; the pods tolerate it, so the scheduler (kwok plays the kubelet) runs them.
    assert set(NODES) <= eventually(placed, timeout=90, what="a node-checks pod on each GPU node")


def test_a_failed_check_sets_the_condition_and_taint_a_pass_clears_both_unknown_changes_nothing(
    site: dict[str, Any],
) -> None:
    node = NODES[0]
    bad = _verdict(site["folder"], "ecc-errors")
    failed = [c for c in json.loads(bad.read_text())["checks"] if c["status"] == "failed"]
    assert failed, "the ECC profile must fail a check"
    first = failed[0]

    done = _set(site, node, bad, "--taint")
    assert done.returncode == 0, done.stderr
    now = _condition(site, node)
    cond = now["condition"]
    assert cond["status"] == "True" and cond["reason"] == "".join(
        w.capitalize() for w in first["id"].replace(".", "_").split("_")
    )
    assert cond["message"].startswith(f"gpuready: {first['id']}: {first['message']}")
    assert f"remedy: {first['remedy']}" in cond["message"]
    assert now["taints"][TAINT] == {"key": TAINT, "value": first["id"], "effect": "NoSchedule"}
    assert GPU_TAINT in now["taints"]  # the taint the node had is kept
    assert now["ready"]["status"] == "True"  # kwok's own conditions untouched
    assert "added" in done.stdout and first["id"] not in done.stderr

    # The same verdict again: nothing moves, not even the transition time.
    again = _set(site, node, bad, "--taint")
    assert again.returncode == 0 and "(unchanged)" in again.stdout, again.stdout + again.stderr
    before = _condition(site, node)
    assert before["condition"]["lastTransitionTime"] == cond["lastTransitionTime"]

    # Checks that could not run (nvidia-smi hangs past the budget): unknown, so the failure stays as it was.
    unknown = _verdict(site["folder"], "ecc-errors", hang=True)
    assert not [c for c in json.loads(unknown.read_text())["checks"] if c["status"] == "failed"]
    done = _set(site, node, unknown, "--taint")
    assert done.returncode == 0 and "left as they were" in done.stdout, done.stdout + done.stderr
    after = _condition(site, node)
    assert after["condition"] == before["condition"] and after["taints"] == before["taints"]

    # Repaired: the checks pass; condition False, the taint gone (the flag is not needed to take it away).
    good = _verdict(site["folder"], "a100-x4")
    assert json.loads(good.read_text())["status"] == "passed", good.read_text()
    done = _set(site, node, good)
    assert done.returncode == 0, done.stderr
    now = _condition(site, node)
    assert now["condition"]["status"] == "False" and now["condition"]["reason"] == "ChecksPassed"
    assert TAINT not in now["taints"] and GPU_TAINT in now["taints"]
    assert now["condition"]["lastTransitionTime"] >= cond["lastTransitionTime"]


def test_without_the_taint_opt_in_rbac_a_failure_is_one_line_naming_the_verb_and_resource(
    site: dict[str, Any],
) -> None:
    lab: LabCluster = site["lab"]
    node = NODES[1]
    bad = _verdict(site["folder"], "ecc-errors")
    # The condition alone needs no more than kube_node_checks.yaml grants.
    lab.kubectl.run("delete", "-f", str(PLATFORMS / "kube_node_checks_taint.yaml"))
    try:
        plain = _set(site, node, bad)
        assert plain.returncode == 0, plain.stderr
        assert _condition(site, node)["condition"]["status"] == "True"
        assert TAINT not in _condition(site, node)["taints"]
        denied = _set(site, node, bad, "--taint")
    finally:
        lab.kubectl.run("create", "-f", str(PLATFORMS / "kube_node_checks_taint.yaml"))
    assert denied.returncode == 3, denied.stderr
    lines = denied.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuready: error: not allowed to patch nodes"), denied.stderr
    assert 'cannot patch resource "nodes"' in lines[0] and "403" in lines[0]
    assert TAINT not in _condition(site, node)["taints"]
    # Cleared for the next test.
    assert _set(site, node, _verdict(site["folder"], "a100-x4")).returncode == 0


def test_a_node_the_api_does_not_know_is_one_line_and_exit_2(site: dict[str, Any]) -> None:
    done = _set(site, "no-such-node", _verdict(site["folder"], "ecc-errors"), "--taint")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"gpuready: error: node 'no-such-node' is not a node of the Kubernetes cluster at {site['lab'].state['url']}"
    )


def _verdicts(site: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts docs/fleet.md's blocks name, in the folder they run in, as the DaemonSet's service account
    ($KUBECONFIG)."""
    for profile in ("ecc-errors", "a100-x4"):
        (tmp_path / f"{profile}.json").write_text(this_node(site["folder"], profile, NODES[0]).stdout)
    monkeypatch.setenv("KUBECONFIG", str(site["kubeconfig"]))


def test_the_docs_sample_sets_and_clears_the_condition_and_taint(
    site: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _verdicts(site, tmp_path, monkeypatch)
    sample = owned_block(ROOT / "docs" / "fleet.md")
    done = sample.run(tmp_path)
    assert [d.returncode for d in done] == [0, 0], [d.stdout for d in done]
    sample.assert_printed(done)
    assert TAINT not in _condition(site, NODES[0])["taints"]


def test_the_docs_sample_of_refusals_is_one_line_each(
    site: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab: LabCluster = site["lab"]
    _verdicts(site, tmp_path, monkeypatch)
    sample = owned_block(ROOT / "docs" / "fleet.md")
    lab.kubectl.run("delete", "-f", str(PLATFORMS / "kube_node_checks_taint.yaml"))
    try:
        done = sample.run(tmp_path)
    finally:
        lab.kubectl.run("create", "-f", str(PLATFORMS / "kube_node_checks_taint.yaml"))
    assert [d.returncode for d in done] == [3, 2], [d.stdout for d in done]
    sample.assert_printed(done)
    # Put back as the next test expects: the condition the refused run set is cleared.
    assert _set(site, NODES[0], tmp_path / "a100-x4.json").returncode == 0
