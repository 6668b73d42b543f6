"""A host is reached as Ansible would reach it. Ansible's implicit localhost (a local connection) exists only
for a localhost the inventory does not define; one it lists without ansible_connection is an ssh host like any
other (https://docs.ansible.com/ansible/latest/inventory/implicit_localhost.html). Validating the admin machine
in its place would report that machine's state as the node's."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from tests.conftest import gpuready, require
from tests.unit.core.test_bad_inputs import make_inventory, with_settings


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released): ssh to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1"])
def test_a_listed_localhost_without_a_connection_is_reached_over_ssh(tmp_path: Path, name: str) -> None:
    require(shutil.which("ssh"), "no ssh client (scripts/install-system-deps installs openssh-client)")
    hosts = {"gpu_nodes": {"hosts": {name: {"ansible_port": closed_port()}}}}
    inv = make_inventory(tmp_path, hosts=hosts, settings=with_settings(node_classes__v100__gpu_count=0))
    runs = tmp_path / "runs"
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), "--only", "driver.nouveau_absent")
    # Ansible says UNREACHABLE for this host; so does validate: could not reach, exit 3, never a verdict of
    # the admin machine.
    assert done.returncode == 3, done.stdout + done.stderr
    summary = json.loads(next(runs.glob("*/summary.json")).read_text())
    checks = {c["id"]: c for c in summary["checks"]}
    assert checks["host.reachable"]["status"] == "error"
    assert "driver.nouveau_absent" not in checks or checks["driver.nouveau_absent"]["status"] != "passed"
