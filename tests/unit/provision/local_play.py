"""Run a play on this machine through Ansible's local connection, with gpuready's Ansible configuration."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

BIN = Path(sys.executable).parent


def run_local_play(
    tmp_path: Path, play: list[dict], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    from gpuready.core.runner import ansible_environment

    (tmp_path / "play.yml").write_text(json.dumps(play))
    # A YAML inventory, as gpuready hands Ansible: its configuration enables only the yaml and ini inventory
    # plugins, so a host list ("localhost,") would not parse.
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": {}}}}))
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "hosts.yml", "-c", "local", *args, "play.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**ansible_environment(tmp_path), "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), **(env or {})},
        timeout=300,
    )


SAVED = "saved.json"


def save(expression: str, tmp_path: Path) -> dict[str, Any]:
    """A last task that writes the Jinja ``expression`` as JSON to ``tmp_path``/saved.json (read by run_and_read)."""
    content = "{{ " + expression + " | to_json }}"
    return {"name": "Save", "ansible.builtin.copy": {"content": content, "dest": str(tmp_path / SAVED), "mode": "0644"}}


def run_and_read(tmp_path: Path, play: list[dict], *args: str, env: dict[str, str] | None = None) -> Any:
    """Run the play, which must pass, and return what its ``save`` task wrote."""
    done = run_local_play(tmp_path, play, *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / SAVED).read_text())


def run_role_tasks(
    tmp_path: Path,
    role: str,
    tasks_from: str,
    role_vars: dict[str, Any],
    findings: str,
    *args: str,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one task file of a role on this machine; its play recap stats and the findings it left in ``findings``."""
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {**role_vars, findings: []},
            "tasks": [
                {
                    "name": f"Run the role's {tasks_from}",
                    "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from},
                },
                {"name": "Show the findings", "ansible.builtin.debug": {"var": findings}},
            ],
        }
    ]
    roles = {"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_ROLES_PATH": str(ROOT / "playbooks" / "roles")}
    interpreter = f"ansible_python_interpreter={sys.executable}"
    done = run_local_play(tmp_path, play, "-e", interpreter, *args, env={**roles, **(env or {})})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = json.loads(done.stdout)
    return out["stats"]["localhost"], out["plays"][0]["tasks"][-1]["hosts"]["localhost"][findings]


def collection_filter(name: str, plugin: str | None = None) -> Any:
    """``name`` from the collection's filter plugin file ``<plugin or name>.py``, imported without Ansible's loader."""
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "playbooks" / "plugins" / "filter" / f"{plugin or name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def role_tasks(role: str, tasks_file: str) -> dict[str, dict[str, Any]]:
    """The named tasks of one of the collection's task files (``roles/<role>/tasks/<tasks_file>``), by name."""
    tasks = yaml.safe_load((ROOT / "playbooks" / "roles" / role / "tasks" / tasks_file).read_text())
    return {t["name"]: t for t in tasks if "name" in t}


def role_defaults(role: str) -> dict[str, Any]:
    """A role's defaults/main.yml, as a play's vars."""
    defaults: dict[str, Any] = yaml.safe_load(
        (ROOT / "playbooks" / "roles" / role / "defaults" / "main.yml").read_text()
    )
    return defaults
