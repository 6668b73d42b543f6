"""Against vcsim: validate fails, check changes nothing, apply needs --allow-power-off, apply
changes, apply again changes nothing, validate passes. Every setting is read back with VMware's
govc, not through gpuready's code. The changes are made by community.vmware's and vmware.vmware's
modules (TLS verified against the lab's own CA through SSL_CERT_FILE), and by gpuready's own module
only for attaching GPUs to VMs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpuready
from tests.integration.vsphere.conftest import PASSWORD, Vcsim, provision

pytestmark = pytest.mark.slow


def read_back(vcsim: Vcsim) -> dict[str, Any]:
    """Hosts' ATS and passthrough, VMs' GPUs, settings, reservation and power, via VMware's govc."""
    state: dict[str, Any] = {"hosts": {}, "vms": {}}
    ats = vcsim.ats()
    for path in vcsim.find("h"):
        name = path.rsplit("/", 1)[-1]
        info = vcsim.collect(path, "config.pciPassthruInfo")["config.pciPassthruInfo"]["_value"]
        state["hosts"][name] = {"ats": ats[name], "passthrough": sorted(p["id"] for p in info if p["passthruEnabled"])}
    for path in vcsim.find("m"):
        devices = vcsim.govc("device.info", "-vm", path)["devices"]
        props = vcsim.collect(path, "config.extraConfig", "runtime.powerState", "config.memoryReservationLockedToMax")
        options = props["config.extraConfig"]["_value"]
        extra = {o["key"]: o["value"] for o in options if o["key"].startswith("pciPassthru")}
        state["vms"][path.rsplit("/", 1)[-1]] = {
            "gpus": [d["backing"]["id"] for d in devices if d["type"] == "VirtualPCIPassthrough"],
            "extra": extra,
            "power": props["runtime.powerState"],
            "locked": bool(props["config.memoryReservationLockedToMax"]),
        }
    return state


def summary(artifacts: Path) -> dict[str, Any]:
    """The summary of the latest run (run folders are numbered)."""
    run = sorted(p for p in artifacts.iterdir() if p.is_dir())[-1]
    return json.loads((run / "summary.json").read_text())


def modules(artifacts: Path) -> Counter[tuple[str, str]]:
    """What each module did in the latest run, from ansible-runner's events: (module, changed|ok|skipped)."""
    run = sorted(p for p in artifacts.iterdir() if p.is_dir())[-1]
    seen: Counter[tuple[str, str]] = Counter()
    for path in run.glob("ansible/artifacts/*/job_events/*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        action = data.get("resolved_action") or data.get("task_action") or ""
        if event["event"] in ("runner_on_ok", "runner_item_on_ok"):
            seen[(action, "changed" if data.get("res", {}).get("changed") else "ok")] += 1
        elif event["event"] == "runner_on_skipped":
            seen[(action, "skipped")] += 1
    return seen


#: What makes each change: the collections' modules, and gpuready's own only where none does the job.
CHANGED_BY = {
    "community.vmware.vmware_host_config_manager",
    "community.vmware.vmware_host_passthrough",
    "vmware.vmware.vm_advanced_settings",
    "vmware.vmware.vm_powerstate",
    "gpuready.gpu.vm_gpu_passthrough",
}


def test_check_apply_apply_again_then_validate(vcsim: Vcsim, env: dict[str, str], artifacts: Path) -> None:
    inventory = str(vcsim.inventory())
    untouched = read_back(vcsim)
    assert untouched["hosts"]["DC0_H0"] == {"ats": False, "passthrough": []}
    assert untouched["vms"]["DC0_H0_VM0"]["power"] == "poweredOn"

    before = gpuready("validate", "vsphere", "-i", inventory, "--artifacts", str(artifacts), env=env)
    assert before.returncode == 1, before.stderr
    failed = {(c["host"], c["id"]) for c in summary(artifacts)["checks"] if c["status"] == "failed"}
    assert ("DC0_H0", "vsphere.ats") in failed and ("DC0_H1_VM1", "vsphere.vm.mmio") in failed

    check = provision(inventory, artifacts, env, "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert summary(artifacts)["metrics"]["changed"] > 0
    assert "64-bit MMIO 256 GiB" in check.stderr  # the plan is shown before Ansible runs
    # ATS is a boot option: until the host reboots it is pending, never passed.
    ats = [c for c in summary(artifacts)["checks"] if c["id"] == "vsphere.ats_reboot"]
    expected = {("pending", "ATS would be set; effective at the next boot")}
    assert ats and {(c["status"], c["message"]) for c in ats} == expected, ats
    assert read_back(vcsim) == untouched
    # The plan was made once, by gpuready before Ansible started: the play's plan module did not run.
    assert {how for (a, how) in modules(artifacts) if a == "gpuready.gpu.vsphere_plan"} == {"skipped"}

    refused = provision(inventory, artifacts, env)
    assert refused.returncode == 1
    assert "--allow-power-off" in refused.stdout
    assert read_back(vcsim)["vms"] == untouched["vms"]
    changed_by = {a for (a, how) in modules(artifacts) if how == "changed"}  # the hosts' ATS and passthrough

    apply = provision(inventory, artifacts, env, "--allow-power-off")
    assert apply.returncode == 0, apply.stdout + apply.stderr
    changed_by |= {a for (a, how) in modules(artifacts) if how == "changed"}
    assert changed_by == CHANGED_BY
    after = read_back(vcsim)
    assert after["hosts"]["DC0_H0"] == {
        "ats": True,
        "passthrough": ["0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0"],
    }
    assert after["hosts"]["DC0_H1"]["passthrough"] == ["0000:17:00.0", "0000:31:00.0", "0000:b1:00.0"]
    assert after["vms"]["DC0_H0_VM0"] == {
        "gpus": ["0000:17:00.0", "0000:31:00.0"],
        "power": "poweredOn",
        "locked": True,
        "extra": {
            "pciPassthru.allowP2P": "true",
            "pciPassthru.RelaxACSforP2P": "true",
            "pciPassthru.use64bitMMIO": "TRUE",
            "pciPassthru.64bitMMIOSizeGB": "256",
        },
    }
    assert after["vms"]["DC0_H1_VM1"]["gpus"] == ["0000:b1:00.0"]
    assert after["vms"]["DC0_H1_VM1"]["extra"]["pciPassthru.64bitMMIOSizeGB"] == "128"

    again = provision(inventory, artifacts, env, "--allow-power-off")
    assert again.returncode == 0, again.stdout + again.stderr
    assert summary(artifacts)["metrics"]["changed"] == 0
    assert not {a for (a, how) in modules(artifacts) if how == "changed"}
    assert read_back(vcsim) == after

    valid = gpuready("validate", "vsphere", "-i", inventory, "--artifacts", str(artifacts), env=env)
    assert valid.returncode == 0, valid.stdout
    checks = summary(artifacts)["checks"]
    assert {c["status"] for c in checks} <= {"passed", "skipped"}
    ids = {c["id"] for c in checks}
    assert {
        "vsphere.ats",
        "vsphere.passthrough.0000:17:00.0",
        "vsphere.vm.gpus",
        "vsphere.vm.nvlink_pair",
        "vsphere.vm.p2p",
        "vsphere.vm.relax_acs",
        "vsphere.vm.mmio",
        "vsphere.vm.hardware_version",
        "vsphere.vm.memory_reservation",
        "vsphere.vm.firmware",
    } <= ids

    # The password never reaches an artifact.
    for path in artifacts.rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(errors="replace"), path
