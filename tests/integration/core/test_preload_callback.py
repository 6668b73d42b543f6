"""The preload callback: forked task workers inherit a collection's connection plugin instead of importing it.

The oracle is ansible-core's own plugin loader: with ANSIBLE_DEBUG it logs every plugin it loads and
whether the plugin was already in its cache. A control run without the callback shows that the log
tells the two apart. community.general.chroot stands for any connection plugin from a collection: a
task that needs no connection to the host (set_fact) still loads it, and loading it needs no root.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuready.core.runner import ANSIBLE_SETTINGS, ansible_environment

pytestmark = pytest.mark.slow

PLUGIN = "community.general.chroot"


def _worker_loads(tmp_path: Path, callbacks: str) -> list[str]:
    """The debug lines of the task workers loading the chroot connection plugin, in a two-task play."""
    env = ansible_environment(tmp_path)
    inventory = {"all": {"hosts": {"node": {"ansible_connection": PLUGIN, "ansible_host": "/"}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    tasks = [{"name": f"Fact {n}", "ansible.builtin.set_fact": {f"fact_{n}": n}} for n in range(2)]
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}]))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "hosts.yml", "play.yml"],
        cwd=tmp_path,
        env={**os.environ, **env, "ANSIBLE_DEBUG": "1", "ANSIBLE_CALLBACKS_ENABLED": callbacks},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # class_only=True loads are the controller's own; a worker loads the plugin to make the connection.
    return [
        line
        for line in done.stdout.splitlines()
        if "Loading Connection" in line and "/connection/chroot.py" in line and "class_only=True" not in line
    ]


def test_gpuready_enables_the_callback() -> None:
    assert "gpuready.gpu.preload" in ANSIBLE_SETTINGS["defaults"]["callbacks_enabled"].split(",")


def test_workers_find_the_collection_connection_plugin_already_imported(tmp_path: Path) -> None:
    loads = _worker_loads(tmp_path, ANSIBLE_SETTINGS["defaults"]["callbacks_enabled"])
    assert len(loads) == 2, loads
    assert all("found_in_cache=True" in line for line in loads), loads


def test_without_the_callback_each_worker_imports_it_again(tmp_path: Path) -> None:
    loads = _worker_loads(tmp_path, "ansible.posix.profile_tasks")
    assert len(loads) == 2, loads
    assert not any("found_in_cache=True" in line for line in loads), loads
