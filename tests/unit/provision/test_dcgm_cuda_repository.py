"""Where the dcgm role takes DCGM from on each recorded distribution: its own task, run by Ansible on this machine with
a recording's facts, against what NVIDIA documents (tests/integration/provision/nvidia_reference.py, [DCGM],
[KEYRING]). On Ubuntu the driver comes from Canonical's archive and no CUDA repository is configured by the driver
role, so DCGM needs NVIDIA's cuda-keyring; elsewhere the driver role's CUDA repository serves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.provision import nvidia_reference as ref
from tests.integration.provision import recorded_facts
from tests.unit.provision.local_play import role_defaults, role_tasks, run_local_play

TASK = "DCGM | Work out NVIDIA's CUDA repository for this node"


def _keyring(tmp_path: Path, record: str, repo_url: str = "") -> str:
    task, defaults = role_tasks("dcgm", "present.yml")[TASK], role_defaults("dcgm")
    facts = recorded_facts.facts(record, None)
    out = tmp_path / "chosen.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {**defaults, "gpuready": {"driver": {"repo_url": repo_url}}},
            "tasks": [
                {"name": "Test | Take the recorded facts", "ansible.builtin.set_fact": {"ansible_facts": facts}},
                task,
                {
                    "name": "Test | Write what the role chose",
                    "ansible.builtin.copy": {
                        "content": "{{ dcgm_cuda_keyring_url | to_json }}",
                        "dest": str(out),
                        "mode": "0644",
                    },
                },
            ],
        }
    ]
    done = run_local_play(tmp_path, play)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads(out.read_text()))


@pytest.mark.parametrize("record", sorted(ref.DCGM_KEYRING))
def test_dcgm_comes_from_nvidias_cuda_repository_as_nvidia_documents(tmp_path: Path, record: str) -> None:
    assert _keyring(tmp_path, record) == ref.DCGM_KEYRING[record]


def test_an_air_gapped_mirror_serves_the_keyring(tmp_path: Path) -> None:
    mirror = "http://mirror.example/cuda/ubuntu2204/x86_64/"
    assert _keyring(tmp_path, "ubuntu-22.04", mirror) == mirror + "cuda-keyring_1.1-1_all.deb"
