"""Secure Boot on Ubuntu: a branch whose signed modules Canonical no longer builds for the running kernel is refused
in one line that says so, judged on what apt answered on a real Ubuntu 22.04 (tests/fixtures/apt/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.core.collection import collection_dir
from tests.unit.provision.local_play import run_local_play

RECORDED = Path(__file__).parents[2] / "fixtures" / "apt" / "jammy-signed-modules.txt"
KERNEL = "5.15.0-204-generic"  # the recorded root's running kernel
TASKS = collection_dir() / "roles" / "nvidia_driver" / "tasks" / "signed-modules.yml"


def _play(branch: str, installed: list[str]) -> list[dict]:
    apt = f"lookup('ansible.builtin.file', {str(RECORDED)!r}) | gpuready.gpu.apt_state"
    return [
        {
            "name": "The driver role's refusal, on apt's recorded answer",
            "hosts": "all",
            "gather_facts": False,
            "vars": {
                "nvidia_driver_kernel_release": KERNEL,
                "nvidia_driver_plan": {
                    "branch": branch,
                    "running_kernel_modules": [f"linux-modules-nvidia-{branch}-server-{KERNEL}"],
                },
            },
            "tasks": [
                {
                    "name": "Read apt's answer as read-packages.yml does",
                    "ansible.builtin.set_fact": {
                        "nvidia_driver_apt": f"{{{{ {apt} }}}}",
                        "nvidia_driver_installed_packages": f"{{{{ ({apt}).packages | combine(extra) }}}}",
                    },
                    "vars": {"extra": {name: [{"version": "1"}] for name in installed}},
                },
                {"ansible.builtin.import_tasks": str(TASKS)},
            ],
        }
    ]


def test_a_branch_without_signed_modules_for_the_kernel_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_local_play(tmp_path, _play("535", []))
    assert done.returncode != 0
    assert (
        "Secure Boot is on and Ubuntu publishes no signed NVIDIA 535 modules for the running kernel "
        f"{KERNEL} (apt has no linux-modules-nvidia-535-server-{KERNEL})"
    ) in " ".join(done.stdout.split())


@pytest.mark.parametrize(
    ("branch", "installed"),
    [("580", []), ("535", [f"linux-modules-nvidia-535-server-{KERNEL}"])],
    ids=["built for the kernel", "already installed"],
)
def test_a_branch_with_signed_modules_for_the_kernel_goes_on(tmp_path: Path, branch: str, installed: list[str]) -> None:
    done = run_local_play(tmp_path, _play(branch, installed))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipping: [localhost]" in done.stdout
