"""Run a play on this machine through Ansible's local connection, with gpuready's Ansible configuration."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def collection_filter(name: str, plugin: str | None = None) -> Any:
    """``name`` from the collection's filter plugin file ``<plugin or name>.py``, imported without Ansible's loader."""
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "playbooks" / "plugins" / "filter" / f"{plugin or name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)
