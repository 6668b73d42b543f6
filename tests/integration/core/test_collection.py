"""playbooks/ is the Ansible collection gpuready.gpu: ansible-galaxy builds and installs it, and a
playbook that is not ours uses one of its roles, with no gpuready configuration in sight."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from gpuready.core import role_defaults
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "playbooks" / "galaxy.yml").read_text())


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_galaxy_yml_names_the_collection_and_requirements_pin_its_dependencies() -> None:
    assert (GALAXY["namespace"], GALAXY["name"]) == ("gpuready", "gpu")
    pinned = {
        c["name"]: c["version"]
        for c in yaml.safe_load((ROOT / "playbooks" / "requirements.yml").read_text())["collections"]
    }
    assert set(pinned) == set(GALAXY["dependencies"])
    assert all(str(v)[0].isdigit() for v in pinned.values()), pinned


def test_built_collection_installs_and_a_foreign_playbook_runs_one_of_its_roles(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # Nothing of gpuready's: no ANSIBLE_CONFIG, no collections path, a working directory with no ansible.cfg.
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    built = _run(
        [str(BIN / "ansible-galaxy"), "collection", "build", str(ROOT / "playbooks"), "--output-path", str(tmp_path)],
        tmp_path,
        env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [tarball] = tmp_path.glob("gpuready-gpu-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        manifest = json.loads(tar.extractfile("MANIFEST.json").read())  # type: ignore[union-attr]
    assert "roles/preflight/tasks/main.yml" in names
    assert "plugins/modules/vsphere_plan.py" in names
    assert not {"__init__.py", "site.yml"} & names
    assert manifest["collection_info"]["version"] == GALAXY["version"]

    collections = tmp_path / "collections"
    installed = _run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(collections), str(tarball)],
        tmp_path,
        env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (collections / "ansible_collections" / "gpuready" / "gpu" / "roles" / "preflight").is_dir()

    project = tmp_path / "project"
    project.mkdir()
    (project / "mine.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Someone else's playbook",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": True,
                    "vars": {
                        "ansible_python_interpreter": sys.executable,
                        "preflight_node_class": "workstation",
                        "preflight_expected_gpus": 0,
                        "preflight_min_free_disk_gib": 0,
                        "preflight_selinux_expect": "any",
                        "preflight_stop_on_failure": False,
                    },
                    "roles": [{"role": "gpuready.gpu.preflight"}],
                    "post_tasks": [
                        {"name": "Show what the role found", "ansible.builtin.debug": {"var": "gpuready_checks"}}
                    ],
                },
                {
                    # Only the roles' settings, with none of gpuready's: the facts they share come with them.
                    "name": "Someone else's cluster play",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars": {"ansible_python_interpreter": sys.executable},
                    "tasks": [
                        *(
                            {
                                "name": f"Take the {role} role's settings",
                                "ansible.builtin.import_role": {"name": f"gpuready.gpu.{role}"},
                                "when": False,
                            }
                            for role in ("nvidia_device_plugin", "gpu_selinux")
                        ),
                        {
                            "name": "Show them",
                            "ansible.builtin.debug": {
                                "msg": "selector={{ nvidia_device_plugin_node_selector }} "
                                "namespace={{ nvidia_device_plugin_namespace }} "
                                "account={{ nvidia_device_plugin_service_account }} "
                                "kubelet={{ nvidia_device_plugin_kubelet_dir }} "
                                "selinux={{ gpu_selinux_file_contexts | map(attribute='target') | join(',') }}"
                            },
                        },
                    ],
                },
            ],
            sort_keys=False,
        )
    )
    played = _run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "mine.yml"],
        project,
        {**env, "ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_NOCOLOR": "1"},
    )
    assert played.returncode == 0, played.stdout + played.stderr
    assert "Preflight | Find NVIDIA GPUs on the PCI bus" in played.stdout
    assert "preflight.os" in played.stdout and "preflight.disk" in played.stdout
    assert "failed=0" in played.stdout
    kubelet = role_defaults.kubelet_device_plugins_dir()
    assert f"selector={role_defaults.gpu_label()} " in played.stdout
    assert f"namespace={role_defaults.device_plugin_namespace('kubernetes')} " in played.stdout
    assert f"account={role_defaults.device_plugin_service_account()} " in played.stdout
    assert f"kubelet={kubelet} " in played.stdout
    assert f",{kubelet}(/.*)?" in played.stdout
