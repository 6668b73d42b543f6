"""A node whose Python Ansible cannot use stops before fact gathering, with one line saying what to do.

ansible-core 2.17 dropped Python 2.7 and 3.6 on managed nodes ("Removed Python 2.7 and Python 3.6 as a
supported remote version. Python 3.7+ is now required for target execution", ansible/ansible
changelogs/CHANGELOG-v2.17.rst, v2.17.0) and 2.18 needs 3.8 ("The minimum supported Python version on
targets is now Python 3.8", CHANGELOG-v2.18.rst, v2.18.0). RHEL 7.9 runs modules with Python 2.7.5 (Foreman's
recording, tests/fixtures/facts/rhel-7.json: `ansible_python_version`) and has 3.6 in its base repository.

Each host is this machine reached locally. The RHEL 7 ones get an interpreter that answers `-V` as those
Pythons do (Python 2 prints "Python 2.7.5" on stderr, Python 3 on stdout) and can run nothing else, so a
module that reached it would fail: the host must stop at the check, before fact gathering.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.release import __version__ as ansible_core

from gpuready.core.errors import shorten
from gpuready.core.runner import run_playbook
from tests.conftest import ROOT, ModuleTmp

pytestmark = pytest.mark.slow

# ansible-core minor -> the oldest Python it runs modules with (the changelogs above; 2.19 kept 3.8).
MIN_TARGET_PYTHON = {(2, 17): "3.7", (2, 18): "3.8", (2, 19): "3.8"}
STOP = "Preflight | Stop a node whose Python Ansible cannot use"


def _rhel7_python() -> str:
    facts = json.loads((ROOT / "tests" / "fixtures" / "facts" / "rhel-7.json").read_text())["ansible_facts"]
    return facts["ansible_python_version"]


def _interpreter(path: Path, version: str, stream: str) -> Path:
    redirect = " >&2" if stream == "stderr" else ""
    path.write_text(f'#!/bin/sh\n[ "$1" = -V ] && echo "Python {version}"{redirect} && exit 0\nexit 1\n')
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def run(module_tmp: ModuleTmp) -> Any:
    tmp = module_tmp("preflight-python")
    (tmp / "el7-base").mkdir()
    python2 = _interpreter(tmp / "python", _rhel7_python(), "stderr")
    python36 = _interpreter(tmp / "el7-base" / "python3", "3.6.8", "stdout")
    hosts = {
        # The inventory names the interpreter, as it must when discovery would not find the right one.
        "el7-python27": {"ansible_python_interpreter": str(python2)},
        # Left to interpreter discovery, which finds only the base repository's 3.6.
        "el7-python36": {"ansible_interpreter_python_fallback": [str(tmp / "el7-base" / "python3")]},
        "this-python": {"ansible_python_interpreter": sys.executable},
    }
    settings = {
        "node_classes": {"no-gpu": {"gpu_count": 0}},
        "driver": {"branch": "550"},
        "container_runtime": "none",
        "preflight": {"min_free_disk_gib": 0, "stop_on_failure": False},
    }
    inventory = tmp / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    common = {"ansible_connection": "local"}
    (inventory / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": common}}))
    (inventory / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
    found = run_playbook("site.yml", inventory, tmp / "runs", check=True, tags=["preflight"])
    return found, {"el7-python27": python2, "el7-python36": python36}


def _check(run: Any, host: str) -> Any:
    return next(c for c in run.hosts[host].checks if c.id == "preflight.python")


@pytest.mark.parametrize(("host", "version"), [("el7-python27", "2.7.5"), ("el7-python36", "3.6.8")])
def test_a_rhel7_python_stops_the_host_before_facts_with_one_line(run: Any, host: str, version: str) -> None:
    found, paths = run
    need = MIN_TARGET_PYTHON[tuple(int(n) for n in ansible_core.split(".")[:2])]
    check = _check(found, host)
    assert check.status == "failed"
    needs = f"ansible-core {ansible_core} needs Python {need}+ on the node"
    assert check.message == f"Python {version} at {paths[host]} is too old: {needs}"
    assert "rh-python38" in check.remedy and "ansible_python_interpreter" in check.remedy
    # One failed task, the check's (its line as the results show it): nothing ran in that Python, not even
    # fact gathering.
    assert found.hosts[host].failed_tasks == [(STOP, shorten(f"{host}: {check.message}; {check.remedy}"))]
    assert {c.id for c in found.hosts[host].checks} == {"preflight.python"}


def test_a_python_ansible_supports_passes_and_preflight_goes_on(run: Any) -> None:
    found, _ = run
    check = _check(found, "this-python")
    version = ".".join(map(str, sys.version_info[:3]))
    assert check.status == "passed", check.message
    assert check.message.startswith(f"Python {version} at {sys.executable} (")
    assert found.hosts["this-python"].failures == 0
    assert {"preflight.os", "preflight.disk"} <= {c.id for c in found.hosts["this-python"].checks}
