"""The GPU node roles: structure, documented tunables, lint and syntax."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, require

PLAYBOOKS = ROOT / "playbooks"
ROLES = ["nvidia_driver", "dcgm", "nccl_tests", "nvidia_container_toolkit", "gpu_selinux", "fabric", "mpi_ssh"]
BIN = Path(sys.executable).parent


def _present() -> list[str]:
    return [r for r in ROLES if (PLAYBOOKS / "roles" / r / "tasks" / "main.yml").is_file()]


@pytest.mark.parametrize("role", _present())
def test_every_default_is_role_prefixed_commented_and_in_the_argument_specs(role: str) -> None:
    base = PLAYBOOKS / "roles" / role
    text = (base / "defaults" / "main.yml").read_text()
    defaults = yaml.safe_load(text)
    options = yaml.safe_load((base / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    lines = text.splitlines()
    for key in defaults:
        assert key.startswith(f"{role}_")
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
        assert lines[at - 1].startswith("#"), f"{key} needs a comment saying why"
    assert (base / "meta" / "main.yml").is_file()


@pytest.mark.parametrize("tag", ["driver", "dcgm", "nccl_tests", "container_runtime", "selinux"])
def test_each_layer_has_its_tag_in_site_yml(tag: str) -> None:
    plays = yaml.safe_load((PLAYBOOKS / "site.yml").read_text())
    assert [p for p in plays if tag in p.get("tags", [])]


def test_site_yml_passes_the_syntax_check(tmp_path: Path) -> None:
    from gpuready.core.runner import ansible_environment

    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(PLAYBOOKS / "site.yml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**ansible_environment(tmp_path), "PATH": f"{BIN}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr


def test_the_roles_pass_ansible_lint_production_profile(tmp_path: Path) -> None:
    from gpuready.core.runner import ansible_environment

    lint = BIN / "ansible-lint"
    require(shutil.which(str(lint)), "ansible-lint not installed (the dev extra installs it)")
    collections = ansible_environment(tmp_path)["ANSIBLE_COLLECTIONS_PATH"]
    done = subprocess.run(
        [str(lint), "--profile", "production", "--offline", "-f", "pep8", *(f"roles/{r}" for r in _present())],
        cwd=PLAYBOOKS,
        capture_output=True,
        text=True,
        env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(Path.home()), "ANSIBLE_COLLECTIONS_PATH": collections},
    )
    assert done.returncode == 0, done.stdout + done.stderr
