"""The CDI specification follows the driver: NVIDIA's real nvidia-ctk reads a driver root that changes version.

nvidia-ctk (built from NVIDIA's Go module) runs in its management mode against a driver root in a temporary folder:
character device nodes /dev/nvidiactl and /dev/nvidia0 (NVIDIA's major 195) and the driver's libraries named by
version, as the driver package installs them. Replacing the libraries with another release's is what a driver
upgrade does to the files nvidia-ctk reads; the specification must then name the new ones.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require
from tests.integration.provision import nvidia_ctk
from tests.unit.provision.local_play import run_role_tasks

LIBDIR = "usr/lib/x86_64-linux-gnu"
LIBRARIES = ("libcuda.so", "libnvidia-ml.so")
OLD, NEW = "580.95.05", "580.159.04"  # two releases of NVIDIA's 580 branch; the second is the H100 recording's


@pytest.fixture(scope="module")
def ctk() -> Path:
    ok, why = nvidia_ctk.prerequisites()
    require(ok, why)
    require(os.geteuid() == 0, "making NVIDIA's character device nodes (mknod) needs root")
    return nvidia_ctk.build()


def _install_driver(root: Path, version: str) -> None:
    """The driver's user-space libraries of ``version`` (and no other), with their .so.1 links."""
    libdir = root / LIBDIR
    libdir.mkdir(parents=True, exist_ok=True)
    for old in libdir.iterdir():
        old.unlink()
    for name in LIBRARIES:
        (libdir / f"{name}.{version}").write_bytes(b"")
        (libdir / f"{name}.1").symlink_to(f"{name}.{version}")
    dev = root / "dev"
    if not dev.exists():
        dev.mkdir()
        os.mknod(dev / "nvidiactl", 0o20644, os.makedev(195, 255))
        os.mknod(dev / "nvidia0", 0o20644, os.makedev(195, 0))


def _play(
    tmp: Path, ctk: Path, driver_root: Path, spec: Path, *, check: bool = False, **more: object
) -> dict[str, Any]:
    role_vars = {
        "nvidia_container_toolkit_ctk": str(ctk),
        "nvidia_container_toolkit_cdi_spec": str(spec),
        "nvidia_container_toolkit_manage_services": False,
        **more,
    }
    # nvidia-ctk's own settings (`nvidia-ctk cdi generate --help`): where the driver is, and the mode that needs
    # no NVML (this machine has no GPU); the role passes them through untouched.
    ctk_env = {"NVIDIA_CTK_DRIVER_ROOT": str(driver_root), "NVIDIA_CTK_CDI_GENERATE_MODE": "management"}
    stats, findings = run_role_tasks(
        tmp,
        "nvidia_container_toolkit",
        "cdi.yml",
        role_vars,
        "nvidia_container_toolkit_findings",
        *(["--check"] if check else []),
        env=ctk_env,
    )
    return {"stats": stats, "finding": findings[-1]}


def _mounted_libraries(spec: Path) -> set[str]:
    doc = yaml.safe_load(spec.read_text())
    return {Path(m["hostPath"]).name for m in doc["containerEdits"]["mounts"]}


def test_a_driver_change_regenerates_the_cdi_specification_once(ctk: Path, tmp_path: Path) -> None:
    root, spec = tmp_path / "driver", tmp_path / "etc" / "cdi" / "nvidia.yaml"
    spec.parent.mkdir(parents=True)
    _install_driver(root, OLD)

    first = _play(tmp_path, ctk, root, spec)
    assert first["finding"]["status"] == "passed", first["finding"]
    assert _mounted_libraries(spec) == {f"{name}.{OLD}" for name in LIBRARIES}
    second = _play(tmp_path, ctk, root, spec)
    assert second["stats"]["changed"] == 0, "a second run with the same driver changed the spec"

    _install_driver(root, NEW)
    before = spec.read_bytes()
    checked = _play(tmp_path, ctk, root, spec, check=True)
    assert spec.read_bytes() == before, "check mode wrote the CDI specification"
    assert checked["stats"]["changed"] == 1, "check mode did not say the specification would change"

    upgraded = _play(tmp_path, ctk, root, spec)
    assert upgraded["stats"]["changed"] == 1
    assert _mounted_libraries(spec) == {f"{name}.{NEW}" for name in LIBRARIES}, "the spec still names the old driver"
    assert "written for the installed driver" in upgraded["finding"]["message"]
    assert _play(tmp_path, ctk, root, spec)["stats"]["changed"] == 0


def test_nvidia_ctk_failing_is_a_failed_finding_and_writes_nothing(ctk: Path, tmp_path: Path) -> None:
    spec = tmp_path / "nvidia.yaml"
    result = _play(tmp_path, ctk, tmp_path / "no-driver", spec)
    assert result["finding"]["status"] == "failed"
    assert result["finding"]["message"].startswith("nvidia-ctk cdi generate failed: ")
    assert not spec.exists()


def test_with_the_drivers_reboot_withheld_the_specification_is_pending_not_failed(ctk: Path, tmp_path: Path) -> None:
    # What the driver role leaves when it installed a driver and withheld the reboot (its default): the fact
    # nvidia_driver_reboot_pending. nvidia-ctk, real, finds no driver to read, as before that reboot.
    spec = tmp_path / "nvidia.yaml"
    result = _play(tmp_path, ctk, tmp_path / "no-driver", spec, nvidia_driver_reboot_pending=True)
    finding = result["finding"]
    assert finding["status"] == "pending", finding
    assert finding["message"].startswith("CDI specification waits for the reboot into the new driver (nvidia-ctk")
    assert finding["remedy"].startswith("reboot the node into the new driver")
    assert not spec.exists()
