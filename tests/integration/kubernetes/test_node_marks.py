"""`validate gpu-node --mark-nodes` against the lab's real Kubernetes control plane, as gpuready's
least-privilege user: the node checks run over real SSH on namespace hosts replaying recorded GPUs, and
the nodes of the same names are labelled or tainted through Ansible, read back with kubectl as the admin.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.lab import kwok as kwok_config
from gpuready.lab.kubernetes import PROFILES
from tests.conftest import ModuleTmp
from tests.integration.kubernetes.conftest import LabCluster, the_one_error
from tests.integration.node.conftest import start

pytestmark = [pytest.mark.root, pytest.mark.slow]
VALIDATED = "gpuready.io/validated"
VALIDATION = "gpuready.io/validation"
FAILED_TAINT = "gpuready.io/validation-failed"
GPU_TAINT = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def site(lab: LabCluster, module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    """A healthy and an ECC-faulty GPU host, and the shared lab with a kwok node of each one's name (taken
    away again at the end, with what gpuready marked on them)."""
    hosts_gen = start(module_tmp("hosts"), ["a100-x4", "ecc-errors"])
    hosts = next(hosts_gen)
    names = {h["profile"]: h["name"] for h in hosts["hosts"]}
    try:
        nodes = [kwok_config.node({"name": n, "profile": "t4", "fault": ""}, PROFILES["t4"]) for n in names.values()]
        lab.kubectl.run("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
        # An admin's label and the GPU taint the nodes already carry must survive every mark.
        lab.kubectl.run("label", "node", names["a100-x4"], "rack=r1")
        yield {"lab": lab, "hosts": hosts, "ok": names["a100-x4"], "bad": names["ecc-errors"]}
    finally:
        lab.kubectl.run("delete", "node", "--ignore-not-found", *names.values())
        next(hosts_gen, None)


def _inventory(site: dict[str, Any], folder: Path, swap: dict[str, str] | None = None) -> Path:
    """The namespace hosts' inventory plus the lab's kube_control_plane and Kubernetes settings
    (its least-privilege kubeconfig). ``swap``: node name -> the host whose address and node class it gets."""
    lab: LabCluster = site["lab"]
    shutil.copytree(site["hosts"]["inventory"], folder)
    hosts = yaml.safe_load((folder / "hosts.yml").read_text())
    lab_hosts = yaml.safe_load((Path(lab.inventory) / "hosts.yml").read_text())
    hosts["kube_control_plane"] = lab_hosts["kube_control_plane"]
    gpu = hosts["gpu_nodes"]["hosts"]
    for node, other in (swap or {}).items():
        gpu[node] = dict(gpu[other])
    (folder / "hosts.yml").write_text(yaml.safe_dump(hosts))
    settings_file = folder / "group_vars/all/gpuready.yml"
    settings = yaml.safe_load(settings_file.read_text())
    lab_settings = yaml.safe_load((Path(lab.inventory) / "group_vars/all/gpuready.yml").read_text())
    settings["gpuready"]["kubernetes"] = lab_settings["gpuready"]["kubernetes"]
    settings_file.write_text(yaml.safe_dump(settings))
    return folder


def _marks(site: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What each node carries, as the admin reads it: gpuready's marks, the admin's label, the GPU taint, and
    whether gpuready's field manager owns anything (controllers and kwok change the rest meanwhile)."""
    items = site["lab"].kubectl.json("get", "nodes", "--show-managed-fields")["items"]
    return {
        n["metadata"]["name"]: {
            "labels": {
                k: v for k, v in n["metadata"].get("labels", {}).items() if k.startswith("gpuready.io/") or k == "rack"
            },
            "annotations": {k: v for k, v in n["metadata"].get("annotations", {}).items() if k == VALIDATION},
            "taints": {t["key"]: t for t in n["spec"].get("taints", []) if t["key"] in (FAILED_TAINT, GPU_TAINT)},
            "gpuready_manager": any(m["manager"] == "gpuready-validation" for m in n["metadata"]["managedFields"]),
        }
        for n in items
        if n["metadata"]["name"] in (site["ok"], site["bad"])
    }


def _rows(summary: dict) -> dict[str, dict]:
    return {c["host"]: c for c in summary["checks"] if c["id"] == "kubernetes.node_marks"}


def _run(site: dict[str, Any], inventory: Path, artifacts: Path, *flags: str) -> tuple[int, str, dict]:
    rc, _, err, summary = site["lab"].run(
        "validate", "gpu-node", "--mark-nodes", *flags, artifacts=artifacts, inventory=inventory
    )
    return rc, err, summary


def test_marks_follow_the_verdicts_check_mode_changes_nothing_and_a_second_run_nothing(
    site: dict[str, Any], tmp_path: Path
) -> None:
    inventory = _inventory(site, tmp_path / "inv")
    lab_settings = yaml.safe_load((inventory / "group_vars/all/gpuready.yml").read_text())["gpuready"]
    assert lab_settings["kubernetes"]["kubeconfig"] != site["lab"].state["admin_kubeconfig"]
    ok, bad = site["ok"], site["bad"]
    before = _marks(site)
    assert not any(m["gpuready_manager"] or FAILED_TAINT in m["taints"] for m in before.values())

    rc, err, summary = _run(site, inventory, tmp_path / "check", "--check")
    assert rc == 1, err  # the ECC host failed its checks
    rows = _rows(summary)
    assert set(rows) == {ok, bad}, err
    assert rows[ok]["message"] == f"labelled {VALIDATED}={dt.datetime.now(dt.timezone.utc).date()} (would change)"
    assert rows[bad]["message"].startswith(f"tainted {FAILED_TAINT}=gpu.") and "(would change)" in rows[bad]["message"]
    assert _marks(site) == before  # a server-side dry run: not even a field manager entry

    rc, err, summary = _run(site, inventory, tmp_path / "apply")
    assert rc == 1, err
    failed_checks = sorted(c["id"] for c in summary["checks"] if c["host"] == bad and c["status"] == "failed")
    assert failed_checks == ["gpu.ecc_volatile", "gpu.xid"]
    after = _marks(site)
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert after[ok]["labels"][VALIDATED] == today and after[ok]["labels"][VALIDATION] == "passed"
    assert after[ok]["labels"]["rack"] == "r1"
    assert FAILED_TAINT not in after[ok]["taints"]
    assert VALIDATED not in after[bad]["labels"] and after[bad]["labels"][VALIDATION] == "failed"
    taints = after[bad]["taints"]
    assert taints[FAILED_TAINT]["effect"] == "NoSchedule" and taints[FAILED_TAINT]["value"] in failed_checks
    assert taints[GPU_TAINT] == before[bad]["taints"][GPU_TAINT]  # the GPU taint the node had is untouched
    assert after[bad]["annotations"][VALIDATION] == f"failed {today}: {', '.join(failed_checks)}"
    assert rows != _rows(summary) and all(r["message"].endswith("(changed)") for r in _rows(summary).values())

    rc, err, summary = _run(site, inventory, tmp_path / "again")
    assert rc == 1, err
    assert all(r["message"].endswith("(unchanged)") for r in _rows(summary).values()), _rows(summary)
    assert summary["metrics"]["node_marks"]["changed"] == 0
    assert _marks(site) == after

    # The faulty node is repaired (its name now reaches the healthy host): the taint goes, the label comes.
    repaired = _inventory(site, tmp_path / "repaired", swap={bad: ok})
    rc, err, summary = _run(site, repaired, tmp_path / "repaired-run")
    assert rc == 0, err
    now = _marks(site)[bad]
    assert set(now["taints"]) == {GPU_TAINT}
    assert now["labels"][VALIDATED] == today and now["labels"][VALIDATION] == "passed"
    assert now["annotations"][VALIDATION] == f"passed {today}"


def test_without_patch_on_nodes_it_is_exit_3_naming_the_forbidden_call(site: dict[str, Any], tmp_path: Path) -> None:
    lab: LabCluster = site["lab"]
    inventory = _inventory(site, tmp_path / "inv", swap={site["bad"]: site["ok"]})
    with lab.without("clusterrolebinding", "gpuready"):
        rc, err, summary = _run(site, inventory, tmp_path / "runs")
    error = the_one_error(rc, err)
    assert "--mark-nodes" in error and "forbidden" in error.lower() and "nodes" in error
    assert summary["checks"] and {c["status"] for c in summary["checks"] if c["id"] != "kubernetes.node_marks"} <= {
        "passed",
        "skipped",
    }
