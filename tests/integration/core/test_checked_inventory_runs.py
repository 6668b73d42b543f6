"""Ansible runs on exactly the inventory gpuready checked: other files in the inventory folder (a second hosts
file, an executable inventory script) are neither checked nor run."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from tests.conftest import gpuready
from tests.unit.core.test_bad_inputs import make_inventory
from tests.unit.core.test_scope import LOCAL, marking_playbooks

pytestmark = pytest.mark.slow


def plant_strangers(inv: Path, tmp_path: Path) -> Path:
    """Beside hosts.yml: an executable script that prints a host (and leaves a marker when it runs), a second
    YAML file of hosts; returns the script's marker."""
    ran = tmp_path / "script-ran"
    script_hosts = {"gpu_nodes": {"hosts": ["from-script"]}, "_meta": {"hostvars": {"from-script": LOCAL}}}
    script = inv / "extra.sh"
    script.write_text(f"#!/bin/sh\ntouch {ran}\necho '{json.dumps(script_hosts)}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (inv / "more.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {"from-second-yml": LOCAL}}}))
    return ran


def test_provision_runs_on_the_checked_hosts_only(tmp_path: Path, artifacts: Path) -> None:
    playbooks, marks = marking_playbooks(tmp_path)
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gpu01": LOCAL}}})
    ran = plant_strangers(inv, tmp_path)
    checked = gpuready("inventory", "check", "-i", str(inv), "--artifacts", str(artifacts))
    assert checked.returncode == 0, checked.stderr
    done = gpuready(
        "provision", "cluster", "-i", str(inv), "--artifacts", str(artifacts),
        env={"GPUREADY_PLAYBOOKS": str(playbooks)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in marks.iterdir()) == ["gpu01"]
    assert not ran.exists(), "a script in the inventory folder ran"
    [recap] = artifacts.glob("*-provision-cluster/recap.json")
    assert sorted(json.loads(recap.read_text())) == ["gpu01", "status"]


def test_the_copy_given_to_ansible_is_private_and_removed(tmp_path: Path, artifacts: Path) -> None:
    """The copy is made under TMPDIR, readable by the user only, and gone after the run; the group_vars and
    host_vars it carries are the ones that were checked (a host var reaches the play)."""
    playbooks, marks = marking_playbooks(tmp_path)
    play = yaml.safe_load((playbooks / "site.yml").read_text())
    play[0]["tasks"] += [
        {
            "name": "Mark | Look at the copy",
            "ansible.builtin.stat": {"path": "{{ inventory_file }}"},
            "register": "copy",
        },
        {
            "name": "Mark | Record the copy",
            "ansible.builtin.copy": {
                "dest": f"{marks}/seen",
                "content": "{{ inventory_dir }} {{ stamp }} {{ gpuready.driver.branch }} {{ copy.stat.mode }}",
            },
        },
    ]
    (playbooks / "site.yml").write_text(yaml.safe_dump(play))
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gpu01": LOCAL}}})
    (inv / "host_vars" / "gpu01").mkdir(parents=True)
    (inv / "host_vars" / "gpu01" / "stamp.json").write_text('{"stamp": "from-host-vars"}\n')
    temp = tmp_path / "temp"
    temp.mkdir()
    done = gpuready(
        "provision", "cluster", "-i", str(inv), "--artifacts", str(artifacts),
        env={"GPUREADY_PLAYBOOKS": str(playbooks), "TMPDIR": str(temp)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    folder, stamp, branch, mode = (marks / "seen").read_text().split()
    assert (stamp, branch, mode) == ("from-host-vars", "580", "0600")
    assert Path(folder).parent == temp and Path(folder).name.startswith("gpuready-inventory-")
    assert not Path(folder).exists(), "the copy of the inventory was left behind"
    assert not any(temp.glob("gpuready-inventory-*"))
