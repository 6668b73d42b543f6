"""What keeps a provisioning run cheap: pipelined modules and one fact gathering with the facts the roles read.

Both are checked against Ansible itself (ansible-playbook on this machine through the local
connection), not against gpuready's own description of its configuration.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT
from tests.unit.provision.local_play import run_and_read, run_local_play, save

PLAYBOOKS = ROOT / "playbooks"
# Facts the roles read that no fact gathering provides: set by their own modules (package_facts, getent).
FACTS_FROM_MODULES = {"packages", "getent_passwd"}


def test_modules_are_pipelined_without_a_temporary_folder_on_the_node(tmp_path: Path) -> None:
    play = [
        {
            "name": "One module call",
            "hosts": "all",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [{"name": "Ping", "ansible.builtin.ping": {}}],
        }
    ]
    done = run_local_play(tmp_path, play, "-vvv")
    assert done.returncode == 0, done.stdout + done.stderr
    # Without pipelining Ansible makes a remote temporary folder and PUTs the module file into it.
    assert "PUT " not in done.stdout, done.stdout
    assert not re.search(r"EXEC .*mkdir", done.stdout), done.stdout
    assert re.search(r"EXEC .*python", done.stdout), done.stdout


def _facts_the_roles_read() -> set[str]:
    names: set[str] = set()
    for path in (PLAYBOOKS / "roles").rglob("*"):
        if path.suffix in (".yml", ".j2") and path.is_file():
            names.update(re.findall(r"ansible_facts\[['\"](\w+)['\"]\]", path.read_text()))
            names.update(re.findall(r"ansible_facts\.(\w+)", path.read_text()))
    return names - FACTS_FROM_MODULES


def test_every_fact_the_roles_read_is_in_the_one_gathering(tmp_path: Path) -> None:
    plays = yaml.safe_load((PLAYBOOKS / "site.yml").read_text())
    gathering = [p for p in plays if p.get("gather_facts")]
    subsets = {tuple(p.get("gather_subset") or ["all"]) for p in gathering}
    assert len(subsets) == 1, f"plays gather different fact subsets: {subsets}"
    subset = list(next(iter(subsets)))
    assert "all" not in subset
    play = [
        {
            "name": "Gather as site.yml does",
            "hosts": "all",
            "gather_facts": True,
            "gather_subset": subset,
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [save("ansible_facts", tmp_path)],
        }
    ]
    gathered = run_and_read(tmp_path, play)
    wanted = _facts_the_roles_read()
    assert {"distribution", "os_family", "kernel", "mounts"} <= wanted  # the scan finds the roles' reads
    assert wanted - set(gathered) == set()
    assert "interfaces" not in gathered  # the network subset, which no role reads, is not gathered


def test_facts_are_only_under_ansible_facts(tmp_path: Path) -> None:
    play = [
        {
            "name": "Facts as the roles see them",
            "hosts": "all",
            "gather_facts": True,
            "gather_subset": ["min"],
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [
                {
                    "name": "Show",
                    "ansible.builtin.debug": {
                        "msg": "namespaced={{ ansible_facts['os_family'] is defined }}"
                        " injected={{ ansible_os_family is defined }}"
                    },
                }
            ],
        }
    ]
    done = run_local_play(tmp_path, play)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "namespaced=True injected=False" in done.stdout, done.stdout
