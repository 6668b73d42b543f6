"""The dcgm role applied for real to Debian 12 roots through `gpuready provision cluster --tags driver,dcgm`.

Real parts: a Debian 12 root built with mmdebstrap, Ansible's chroot connection, apt and dpkg inside the root,
the CUDA repository source the driver role writes (a signed local apt repository of stand-in NVIDIA packages,
split as NVIDIA splits DCGM 4: a core package and one per CUDA major), and, for the CUDA major, the header of
nvidia-smi as recorded on an H100 with driver 580.159.04.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, ModuleTmp, require
from tests.integration.provision import debian_root as dr

pytestmark = [pytest.mark.root, pytest.mark.slow]
#: nvidia-smi on an H100 80GB HBM3 with driver 580.159.04 (tests/fixtures/gpu/SOURCES.md): "CUDA Version: 13.0".
H100_NVIDIA_SMI = ROOT / "tests" / "fixtures" / "gpu" / "recorded" / "h100-80gb-hbm3-580.159.04" / "22-nvidia-smi.out"
#: What a root cannot do is switched off, as in the other Debian root tests; DCGM is wanted although the class has 0.
HOST_VARS = {"dcgm_wanted": True, "dcgm_manage_services": False}


@pytest.fixture(scope="module")
def repo(module_tmp: ModuleTmp) -> Path:
    ok, why = dr.prerequisites()
    require(ok, why)
    return dr.build_repo(module_tmp("standin"))


def _node(repo: Path, tmp: Path) -> Iterator[tuple[Path, Path]]:
    root = dr.fresh_root(tmp / "root", repo)
    with dr.booted_like(root):
        yield root, dr.write_inventory(tmp / "inventory", {"node1": root}, host_vars=HOST_VARS)


@pytest.fixture(scope="module")
def node(repo: Path, module_tmp: ModuleTmp) -> Iterator[tuple[Path, Path]]:
    yield from _node(repo, module_tmp("node"))


@pytest.fixture(scope="module")
def first(node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, dict[str, Any]]:
    _, inventory = node
    return dr.provision(inventory, module_tmp("first"), "--tags", "driver,dcgm")


def test_dcgm_for_the_driver_branchs_cuda_major_comes_from_the_cuda_repository(
    first: Any, node: tuple[Path, Path]
) -> None:
    root, _ = node
    summary = dr.passed(first)
    checks = dr.checks_by_id(summary)
    # The stand-in nvidia-smi names no CUDA version (no GPU to ask): the 550 branch's major, CUDA 12.
    assert checks["dcgm.install"]["status"] == "passed", checks["dcgm.install"]
    assert checks["dcgm.install"]["message"] == (
        "datacenter-gpu-manager-4-cuda12 installed (CUDA 12, from driver branch 550)"
    )
    installed = set(dr.installed_packages(root))
    assert {"datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-core"} <= installed
    assert "datacenter-gpu-manager-4-cuda13" not in installed
    # The role adds no source: apt found it through the driver role's CUDA repository only.
    sources = sorted(p.name for p in (root / "etc/apt/sources.list.d").iterdir())
    assert not [s for s in sources if "dcgm" in s.lower()], sources
    assert (checks["dcgm.service"]["status"], checks["dcgm.service"]["message"]) == (
        "skipped",
        "dcgm_manage_services is false: enable and start nvidia-dcgm on the node (systemctl --now enable nvidia-dcgm)",
    )


@pytest.fixture(scope="module")
def second(first: Any, node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, ...]:
    root, inventory = node
    before = dr.snapshot(root, "etc", "usr", "var/lib/dpkg")
    done, summary = dr.provision(inventory, module_tmp("second"), "--tags", "dcgm")
    return done, summary, before, dr.snapshot(root, "etc", "usr", "var/lib/dpkg")


def test_the_second_run_changes_nothing(second: Any) -> None:
    done, summary, before, after = second
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary["metrics"]["changed"] == 0, summary["metrics"]["playbooks"]
    assert after == before
    assert dr.checks_by_id(summary)["dcgm.install"]["message"].startswith(
        "datacenter-gpu-manager-4-cuda12 already installed"
    )


def test_a_driver_of_another_cuda_major_gets_its_dcgm_build(
    second: Any, node: tuple[Path, Path], tmp_path: Path
) -> None:
    """nvidia-smi answers as the recorded H100 with driver 580 does: CUDA 13, whatever the inventory's branch."""
    root, inventory = node
    smi = root / "usr/bin/nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{H100_NVIDIA_SMI.read_text()}EOF\n")
    summary = dr.passed(dr.provision(inventory, tmp_path / "runs", "--tags", "dcgm"))
    finding = dr.checks_by_id(summary)["dcgm.install"]
    assert finding["message"] == "datacenter-gpu-manager-4-cuda13 installed (CUDA 13, from nvidia-smi)", finding
    assert "CUDA Version: 13.0" in finding["evidence"]
    installed = set(dr.installed_packages(root))
    assert "datacenter-gpu-manager-4-cuda13" in installed
    assert "datacenter-gpu-manager-4-cuda12" not in installed  # built for a driver the node no longer has


@pytest.fixture(scope="module")
def fresh(repo: Path, module_tmp: ModuleTmp) -> Iterator[tuple[Path, Path]]:
    yield from _node(repo, module_tmp("fresh"))


def test_check_mode_on_a_fresh_root_changes_nothing(fresh: tuple[Path, Path], tmp_path: Path) -> None:
    root, inventory = fresh
    before = dr.snapshot(root, "etc", "usr", "var/lib/dpkg")
    summary = dr.passed(dr.provision(inventory, tmp_path / "runs", "--check", "--tags", "driver,dcgm"))
    assert dr.snapshot(root, "etc", "usr", "var/lib/dpkg") == before
    finding = dr.checks_by_id(summary)["dcgm.install"]
    assert finding["status"] == "skipped", finding
    assert finding["message"].startswith("check mode: would install datacenter-gpu-manager-4-cuda12 (CUDA 12,")


def test_without_the_cuda_repository_the_install_fails_in_one_line(fresh: tuple[Path, Path], tmp_path: Path) -> None:
    _, inventory = fresh
    done, summary = dr.provision(inventory, tmp_path / "runs", "--tags", "dcgm")
    assert done.returncode == 1, done.stdout + done.stderr
    finding = dr.checks_by_id(summary)["dcgm.install"]
    assert finding["status"] == "failed"
    assert finding["message"].startswith("cannot install datacenter-gpu-manager-4-cuda12: ")
    assert "\n" not in finding["message"]
    assert "--tags driver" in finding["remedy"]
