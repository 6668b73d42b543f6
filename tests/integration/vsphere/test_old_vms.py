"""VMs gpuready must not change itself: BIOS firmware and an old hardware version.

A GPU VM that boots BIOS is refused before anything changes (the plan's 64-bit MMIO needs EFI); once the VM is
switched to EFI with VMware's govc, provisioning gives it its GPUs and validation flags the old hardware version.
What changed is read back with govc, not through gpuready's code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ModuleTmp, gpuready
from tests.integration.vsphere.conftest import Vcsim, start_vcsim

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def old_vcsim(vcsim_binary: Path, module_tmp: ModuleTmp) -> Iterator[Vcsim]:
    yield from start_vcsim(vcsim_binary, module_tmp("old-vcsim"), ("-hardware-version", "vmx-13", "-firmware", "bios"))


def _vms(vcsim: Vcsim) -> dict[str, dict[str, Any]]:
    """Each VM's firmware, passthrough GPUs and pciPassthru settings, via govc."""
    state = {}
    for path in vcsim.find("m"):
        props = vcsim.collect(path, "config.firmware", "config.extraConfig")
        devices = vcsim.govc("device.info", "-vm", path)["devices"]
        state[path.rsplit("/", 1)[-1]] = {
            "firmware": props["config.firmware"],
            "gpus": [d["backing"]["id"] for d in devices if d["type"] == "VirtualPCIPassthrough"],
            "extra": {o["key"]: o["value"] for o in props["config.extraConfig"]["_value"] if "MMIO" in o["key"]},
        }
    return state


def _set_firmware(vcsim: Vcsim, firmware: str, *names: str) -> None:
    """What an administrator does in vSphere (govc has no flag for it): reconfigure the VMs' firmware, with plain
    pyvmomi, not gpuready's code."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    si = vcsim.connect()
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    for vm in view.view:
        if not names or vm.name in names:
            WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(firmware=firmware)))


def _provision(inventory: str, artifacts: Path, env: dict[str, str]) -> Any:
    return gpuready(
        "provision", "cluster", "-i", inventory, "--tags", "vsphere", "--allow-power-off",
        "--artifacts", str(artifacts), env=env,
    )  # fmt: skip


def test_the_play_refuses_a_bios_vm_too(old_vcsim: Vcsim, tmp_path: Path, artifacts: Path) -> None:
    """With the password in Ansible Vault, the play's plan module makes the plan: it refuses the same VM."""
    from tests.integration.vsphere.conftest import password_in_vault

    inventory = old_vcsim.inventory("vault-inv")
    env = password_in_vault(inventory, tmp_path)
    before = _vms(old_vcsim)
    refused = _provision(str(inventory), artifacts, env)
    assert refused.returncode != 0
    assert "boots BIOS" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    assert _vms(old_vcsim) == before, "a refused plan changed a VM"
    assert set(old_vcsim.ats().values()) == {False}, "ATS was set although the plan was refused"


def test_a_bios_vm_is_refused_then_provisioned_once_efi(old_vcsim: Vcsim, env: dict[str, str], artifacts: Path) -> None:
    inventory = str(old_vcsim.inventory())
    before = _vms(old_vcsim)
    assert {vm["firmware"] for vm in before.values()} == {"bios"}

    refused = _provision(inventory, artifacts, env)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "boots BIOS" in lines[0] and "64-bit MMIO" in lines[0] and "EFI" in lines[0], lines[0]
    assert _vms(old_vcsim) == before, "a refused plan changed a VM"

    _set_firmware(old_vcsim, "efi")
    applied = _provision(inventory, artifacts, env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = _vms(old_vcsim)
    assert all(vm["gpus"] and vm["extra"].get("pciPassthru.use64bitMMIO") == "TRUE" for vm in after.values()), after

    done = gpuready("validate", "vsphere", "-i", inventory, "--artifacts", str(artifacts), env=env)
    assert done.returncode == 1
    run = sorted(p for p in artifacts.iterdir() if p.is_dir())[-1]
    checks = json.loads((run / "summary.json").read_text())["checks"]
    assert {c["id"] for c in checks if c["status"] == "failed"} == {"vsphere.vm.hardware_version"}
    version = next(c for c in checks if c["id"] == "vsphere.vm.hardware_version")
    assert "vmx-17 or later, found vmx-13" in version["message"]


def test_validation_flags_a_bios_vm(old_vcsim: Vcsim, env: dict[str, str], artifacts: Path) -> None:
    """Validation reads what is there and names BIOS as a finding; it refuses nothing."""
    (path, *_) = old_vcsim.find("m")
    _set_firmware(old_vcsim, "bios", path.rsplit("/", 1)[-1])
    done = gpuready("validate", "vsphere", "-i", str(old_vcsim.inventory()), "--artifacts", str(artifacts), env=env)
    assert done.returncode == 1
    run = sorted(p for p in artifacts.iterdir() if p.is_dir())[-1]
    checks = json.loads((run / "summary.json").read_text())["checks"]
    firmware = [c for c in checks if c["id"] == "vsphere.vm.firmware" and c["status"] == "failed"]
    assert [c["host"] for c in firmware] == [path.rsplit("/", 1)[-1]]
    assert "found bios" in firmware[0]["message"] and firmware[0]["remedy"]
