"""The fabric role on a node without NVIDIA's networking stack: it says in one line what is missing, and offers
DMA-BUF where nvidia-peermem cannot load.

The play runs the role on this machine, which has none of MFT's mst and mlxconfig, MLNX_OFED's ibdev2netdev or
MLNX_OFED's ib_core (the test checks that first): real absences, not stand-ins. Which NVIDIA kernel modules run is
read from a real recording of /proc/driver/nvidia/version (the H100 under tests/fixtures/gpu/recorded, open
kernel modules 580.159.04); the proprietary case is that recording with one field edited (see _driver_file).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, require
from tests.unit.provision.local_play import run_role_tasks

RECORDED = ROOT / "tests/fixtures/gpu/recorded/h100-80gb-hbm3-580.159.04/26-cat-proc-driver-nvidia-version.out"
TOOLS = ("mst", "mlxconfig", "ibdev2netdev")


def _driver_file(tmp: Path, flavour: str) -> Path:
    """The recording, or for ``proprietary`` the one edit that makes it the proprietary module's line: NVIDIA's
    proprietary module reports "NVIDIA UNIX x86_64 Kernel Module", the open one "NVIDIA UNIX Open Kernel Module"."""
    text = RECORDED.read_text()
    assert "NVIDIA UNIX Open Kernel Module for x86_64" in text
    if flavour == "proprietary":
        text = text.replace("NVIDIA UNIX Open Kernel Module for x86_64", "NVIDIA UNIX x86_64 Kernel Module")
    path = tmp / f"version-{flavour}"
    path.write_text(text)
    return path


def _play(tmp: Path, driver_file: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    role_vars = {
        "fabric_settings": {"type": "roce", "ports": ["mlx5_0"], "ats": True, "gpudirect_rdma": True},
        "fabric_kernel": os.uname().release,
        "fabric_driver_version_file": str(driver_file),
        "fabric_manage_links": False,
        "fabric_persist_links": False,
    }
    stats, findings = run_role_tasks(tmp, "fabric", "configure.yml", role_vars, "fabric_findings")
    return stats, {f["id"]: f for f in findings}


@pytest.fixture(scope="module")
def bare_node() -> None:
    require(not any(shutil.which(tool) for tool in TOOLS), "this machine has NVIDIA networking tools installed")
    symbols = Path(f"/lib/modules/{os.uname().release}/modules.symbols")
    has_api = symbols.is_file() and "symbol:ib_register_peer_memory_client " in symbols.read_text()
    require(not has_api, "this machine's ib_core exports MLNX_OFED's peer-memory API")
    require(not Path("/etc/modules-load.d/nvidia-peermem.conf").exists(), "nvidia-peermem is set up here already")


@pytest.mark.usefixtures("bare_node")
@pytest.mark.parametrize("flavour", ["open", "proprietary"])
def test_missing_networking_stack_is_one_line_each_and_dma_buf_is_offered(flavour: str, tmp_path: Path) -> None:
    stats, findings = _play(tmp_path, _driver_file(tmp_path, flavour))
    assert stats["failures"] == 0 and stats["changed"] == 0

    tools = findings["fabric.tools"]
    assert tools["status"] == "failed"
    assert tools["message"] == (
        "missing NVIDIA networking tools: mst (NVIDIA MFT), mlxconfig (NVIDIA MFT), "
        "ibdev2netdev (MLNX_OFED or DOCA-OFED)"
    )
    assert "fabric.ats" not in findings, "ATS was reported without mlxconfig to read it"

    peermem = findings["fabric.peermem"]
    assert peermem["status"] == "failed"
    assert "\n" not in peermem["message"]
    assert peermem["message"].startswith("nvidia-peermem needs MLNX_OFED's ib_core")
    kernel_ok = tuple(int(x) for x in os.uname().release.split(".")[:2]) >= (5, 12)
    if flavour == "open" and kernel_ok:
        assert "DMA-BUF works here without it" in peermem["message"]
        assert "fabric.gpudirect_rdma: false" in peermem["remedy"]
    else:
        assert "DMA-BUF needs Linux 5.12+ and the open kernel modules" in peermem["message"]
        assert peermem["remedy"].startswith("install MLNX_OFED")
    assert not Path("/etc/modules-load.d/nvidia-peermem.conf").exists()
