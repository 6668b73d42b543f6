"""Enterprise Linux 10: which branch NVIDIA's rhel10 repository offers, read on the node before anything is locked.

NVIDIA driver installation guide (595, 620), "Kernel Modules": EL10 has no module streams; the branches are the
versions of `nvidia-open` (open) and `cuda-drivers` (proprietary). The role's own two tasks run under Ansible on this
machine; the dnf they call is a script on PATH that writes its arguments and prints a repoquery answer in dnf 4's
`--qf '%{name} %{version}'` layout (no repoquery of the rhel10 repository is recorded: the versions are real ones,
see tests/unit/provision/test_driver_index.py). What is under test is the command the role gives dnf and what it
makes of the answer, not dnf.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import ROOT
from tests.unit.provision.local_play import BIN, run_local_play

TASKS = ROOT / "playbooks" / "roles" / "nvidia_driver" / "tasks" / "install-redhat.yml"
NAMES = (
    "Driver | Read the driver versions the repository offers",
    "Driver | Refuse a branch the repository does not offer",
)
REPO = "https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/"
OFFERED = "cuda-drivers 580.65.06\nnvidia-open 580.65.06\nnvidia-open 580.126.20\ncuda-drivers 595.58.03\n"


def _run(tmp_path: Path, branch: str, variant: str, index_family: str = "dnf-versions") -> tuple[str, list[str]]:
    tasks = [t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") in NAMES]
    assert [t["name"] for t in tasks] == list(NAMES)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "dnf-calls"
    (tmp_path / "answer").write_text(OFFERED)
    (bin_dir / "dnf").write_text(f'#!/bin/sh\necho "$*" >> {calls}\ncat {tmp_path / "answer"}\n')
    (bin_dir / "dnf").chmod(0o755)
    plan = {"index_family": index_family, "branch": branch, "variant": variant, "repo": REPO}
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {"nvidia_driver_plan": plan, "nvidia_driver_repo_result": {"changed": False}},
            "tasks": tasks,
        }
    ]
    done = run_local_play(tmp_path, play, env={"PATH": f"{bin_dir}:{BIN}:/usr/bin:/bin"})
    said = done.stdout + done.stderr
    return ("passed" if done.returncode == 0 else said), calls.read_text().splitlines() if calls.exists() else []


def test_a_branch_and_flavour_the_repository_offers_goes_on(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, "580", "open")
    assert result == "passed"
    assert calls == ["-q repoquery --qf %{name} %{version} nvidia-open cuda-drivers"]


def test_a_flavour_the_branch_lacks_is_refused_with_what_the_repository_has(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, "595", "open")
    assert (
        f"nvidia_driver: driver branch 595 with open kernel modules is not in {REPO} (branches there: 580, "
        "595 proprietary only)"
    ) in " ".join(result.split())


def test_a_branch_the_repository_lacks_is_refused(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, "610", "proprietary")
    assert "nvidia_driver: driver branch 610 with proprietary kernel modules is not in" in " ".join(result.split())


def test_el_8_and_9_ask_no_repoquery(tmp_path: Path) -> None:
    """Their branches are module streams, read by `dnf module list` (test_module_switch)."""
    result, calls = _run(tmp_path, "610", "open", index_family="dnf-module")
    assert (result, calls) == ("passed", [])
