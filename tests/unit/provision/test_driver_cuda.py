"""The CUDA version a driver supports (the filter the dcgm and nccl_tests layers share): nvidia-smi's header as
recorded on an H100, else the pinned branch by NVIDIA's CUDA Toolkit release notes, "CUDA Toolkit and Corresponding
Driver Versions" (the GA driver of each version: 13.0 580.65.06, 12.9 575.51.03, 12.4 550.54.14, 12.0 525.60.13,
11.8 520.61.05, 11.4 470.42.01, 11.0 450.36.06)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.unit.provision.local_play import collection_filter

driver_cuda = collection_filter("driver_cuda", "driver_index")
H100_NVIDIA_SMI = ROOT / "tests" / "fixtures" / "gpu" / "recorded" / "h100-80gb-hbm3-580.159.04" / "22-nvidia-smi.out"


def test_nvidia_smis_header_decides_over_the_branch() -> None:
    # The recorded H100 (driver 580.159.04) says CUDA 13.0 while the inventory still pins the 550 branch.
    assert driver_cuda(H100_NVIDIA_SMI.read_text(), "550") == {"version": "13.0", "major": 13, "source": "nvidia-smi"}


@pytest.mark.parametrize(
    ("branch", "version"),
    [
        ("580-open", "13.0"),
        ("590", "13.0"),
        ("575", "12.9"),
        ("570-server", "12.8"),
        ("550-server", "12.4"),
        ("535", "12.2"),
        ("525", "12.0"),
        ("520", "11.8"),
        ("470", "11.4"),
        ("450", "11.0"),
    ],
)
def test_before_the_driver_answers_the_branch_decides(branch: str, version: str) -> None:
    said = driver_cuda("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", branch)
    assert said == {"version": version, "major": int(version.split(".")[0]), "source": f"driver branch {branch}"}


@pytest.mark.parametrize("branch", ["418", "", "latest"])
def test_a_branch_older_than_cuda_11_or_none_says_nothing(branch: str) -> None:
    assert driver_cuda("", branch) == {"version": "", "major": 0, "source": ""}
