"""VMs gpuready provisions but must not change itself: BIOS firmware and an old hardware version.
Provisioning gives them their GPUs; validation flags exactly those two findings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.integration.vsphere.conftest import Vcsim, start_vcsim

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def old_vcsim(vcsim_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vcsim]:
    yield from start_vcsim(
        vcsim_binary, tmp_path_factory.mktemp("old-vcsim"), ("-hardware-version", "vmx-13", "-firmware", "bios")
    )


def test_validation_flags_bios_and_old_hardware(old_vcsim: Vcsim, env: dict[str, str], artifacts: Path) -> None:
    inventory = str(old_vcsim.inventory())
    apply = gpuready(
        "provision",
        "cluster",
        "-i",
        inventory,
        "--tags",
        "vsphere",
        "--allow-power-off",
        "--artifacts",
        str(artifacts),
        env=env,
    )
    assert apply.returncode == 0, apply.stdout + apply.stderr
    done = gpuready("validate", "vsphere", "-i", inventory, "--artifacts", str(artifacts), env=env)
    assert done.returncode == 1
    run = sorted(p for p in artifacts.iterdir() if p.is_dir())[-1]
    checks = json.loads((run / "summary.json").read_text())["checks"]
    failed = {c["id"] for c in checks if c["status"] == "failed"}
    assert failed == {"vsphere.vm.firmware", "vsphere.vm.hardware_version"}
    firmware = next(c for c in checks if c["id"] == "vsphere.vm.firmware")
    assert "found bios" in firmware["message"] and firmware["remedy"]
    version = next(c for c in checks if c["id"] == "vsphere.vm.hardware_version")
    assert "vmx-17 or later, found vmx-13" in version["message"]
