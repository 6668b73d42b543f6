"""The nccl_tests role's choice of CUDA version and packages: its own task, run by Ansible on this machine with the
recorded Debian 11 facts, nvidia-smi's answer as recorded on an H100 (driver 580.159.04, "CUDA Version: 13.0") or
none, the inventory's driver branch and its override."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.integration.provision import recorded_facts
from tests.unit.provision.local_play import role_defaults, role_tasks, run_and_read, save

TASK = "NCCL tests | Work out the CUDA version and the packages"
H100_NVIDIA_SMI = ROOT / "tests" / "fixtures" / "gpu" / "recorded" / "h100-80gb-hbm3-580.159.04" / "22-nvidia-smi.out"


def _choose(tmp_path: Path, smi: str, branch: str, cuda_version: str = "") -> dict[str, Any]:
    task, defaults = role_tasks("nccl_tests", "present.yml")[TASK], role_defaults("nccl_tests")
    gpuready = {
        "node_classes": {"hgx": {"gpu_count": 8}},
        "driver": {"branch": branch},
        "nccl_tests": {"cuda_version": cuda_version},
    }
    cache = recorded_facts.fact_cache(tmp_path / "facts", {"localhost": ("debian-11", None)})
    play = [
        {
            "hosts": "localhost",
            "gather_facts": True,  # from the cache: the recorded Debian 11 node
            "vars": {**defaults, "gpuready": gpuready, "nccl_tests_smi": {"stdout": smi, "rc": 0 if smi else 127}},
            "tasks": [
                task,
                save(
                    "{'cuda': nccl_tests_cuda, 'from': nccl_tests_cuda_from, 'home': nccl_tests_cuda_home, "
                    "'packages': nccl_tests_packages + nccl_tests_nccl_specs}",
                    tmp_path,
                ),
            ],
        }
    ]
    env = {
        "ANSIBLE_GATHERING": "smart",
        "ANSIBLE_CACHE_PLUGIN": "jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache),
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0",
    }
    chosen: dict[str, Any] = run_and_read(tmp_path, play, env=env)
    return chosen


def _expected(cuda: str, source: str) -> dict[str, Any]:
    major, minor = cuda.split(".")
    # NCCL's version is read from the node's apt index (tests/integration/provision/test_nccl_tests.py).
    packages = ["make", "g++", "git", f"cuda-nvcc-{major}-{minor}", f"cuda-cudart-dev-{major}-{minor}"]
    return {"cuda": cuda, "from": source, "home": f"/usr/local/cuda-{cuda}", "packages": packages}


def test_nvidia_smis_cuda_version_decides(tmp_path: Path) -> None:
    # The recorded H100 says CUDA 13.0 while the inventory still pins the 550 branch: the driver that runs wins.
    assert _choose(tmp_path, H100_NVIDIA_SMI.read_text(), "550") == _expected("13.0", "nvidia-smi")


def test_before_the_driver_answers_the_branch_decides(tmp_path: Path) -> None:
    # Every branch's CUDA version: tests/unit/provision/test_driver_cuda.py (the filter this task reads it with).
    assert _choose(tmp_path, "", "575") == _expected("12.9", "driver branch 575")


def test_a_driver_of_cuda_11_gets_nothing(tmp_path: Path) -> None:
    # The 470 branch supports CUDA 11.4, a major the layer does not build for.
    assert _choose(tmp_path, "", "470") == {"cuda": "", "from": "", "home": "", "packages": []}


def test_the_inventory_can_force_a_version(tmp_path: Path) -> None:
    chosen = _choose(tmp_path, H100_NVIDIA_SMI.read_text(), "580", cuda_version="12.8")
    assert chosen == _expected("12.8", "gpuready.nccl_tests.cuda_version")
