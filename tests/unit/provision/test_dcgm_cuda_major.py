"""The dcgm role's choice of package: its own task, run by Ansible on this machine, with nvidia-smi's answer as
recorded on an H100 (driver 580.159.04, "CUDA Version: 13.0") or none, and the inventory's driver branch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.unit.provision.local_play import role_defaults, role_tasks, run_local_play

H100_NVIDIA_SMI = ROOT / "tests" / "fixtures" / "gpu" / "recorded" / "h100-80gb-hbm3-580.159.04" / "22-nvidia-smi.out"
TASK = "DCGM | Work out the CUDA major and the package"


def _choose(tmp_path: Path, smi: str, branch: str, cuda_major: int = 0) -> dict[str, Any]:
    task, defaults = role_tasks("dcgm", "present.yml")[TASK], role_defaults("dcgm")
    gpuready = {
        "node_classes": {"gpu": {"gpu_count": 1}},
        "driver": {"branch": branch},
        "dcgm": {"cuda_major": cuda_major},
    }
    out = tmp_path / "chosen.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {**defaults, "gpuready": gpuready, "dcgm_smi": {"stdout": smi, "rc": 0 if smi else 127}},
            "tasks": [
                task,
                {
                    "name": "Test | Write what the role chose",
                    "ansible.builtin.copy": {
                        "content": "{{ {'major': dcgm_cuda_major | int, 'from': dcgm_cuda_from, "
                        "'package': dcgm_package} | to_json }}",
                        "dest": str(out),
                        "mode": "0644",
                    },
                },
            ],
        }
    ]
    done = run_local_play(tmp_path, play)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def test_nvidia_smis_cuda_version_decides(tmp_path: Path) -> None:
    # The recorded H100 says CUDA 13.0 while the inventory still pins the 550 branch: the driver that runs wins.
    chosen = _choose(tmp_path, H100_NVIDIA_SMI.read_text(), "550")
    assert chosen == {"major": 13, "from": "nvidia-smi", "package": "datacenter-gpu-manager-4-cuda13"}


def test_before_the_driver_answers_the_branch_decides(tmp_path: Path) -> None:
    # Every branch's CUDA version: tests/unit/provision/test_driver_cuda.py (the filter this task reads it with).
    chosen = _choose(tmp_path, "", "550-server")
    assert chosen == {"major": 12, "from": "driver branch 550-server", "package": "datacenter-gpu-manager-4-cuda12"}


def test_a_branch_older_than_any_dcgm_4_build_gets_no_package(tmp_path: Path) -> None:
    assert _choose(tmp_path, "", "418") == {"major": 0, "from": "", "package": ""}


def test_the_inventory_can_force_a_major(tmp_path: Path) -> None:
    chosen = _choose(tmp_path, H100_NVIDIA_SMI.read_text(), "580", cuda_major=12)
    assert chosen == {"major": 12, "from": "gpuready.dcgm.cuda_major", "package": "datacenter-gpu-manager-4-cuda12"}
