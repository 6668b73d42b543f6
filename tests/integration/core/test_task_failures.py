"""A command that fails says why in gpuready's results: what it printed, not Ansible's bare "non-zero return code"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, gpuready

LOCAL = ROOT / "inventories" / "local"


@pytest.mark.parametrize("module", ["ansible.builtin.raw", "ansible.builtin.shell"])
def test_a_failed_command_reports_what_it_printed(module: str, tmp_path: Path) -> None:
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    task = {"name": "Disk | Check the disk", "check_mode": False, module: "echo 'no space left on /var' >&2; exit 4"}
    (playbooks / "site.yml").write_text(
        yaml.safe_dump([{"name": "Disk", "hosts": "gpu_nodes", "gather_facts": False, "tasks": [task]}])
    )
    runs = tmp_path / "runs"
    args = ["provision", "cluster", "--check", "-i", str(LOCAL), "--artifacts", str(runs)]
    done = gpuready(*args, env={"GPUREADY_PLAYBOOKS": str(playbooks)})
    assert done.returncode == 1, done.stdout + done.stderr
    [summary] = [json.loads(p.read_text()) for p in runs.glob("*/summary.json")]
    [check] = [c for c in summary["checks"] if c["host"] == "localhost"]
    assert check["status"] == "failed"
    assert check["message"] == "Disk | Check the disk: exit 4: no space left on /var", check
