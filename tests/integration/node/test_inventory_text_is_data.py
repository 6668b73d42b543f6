"""Inventory values are data: nothing in them runs on the admin machine, and a bad one is one line, exit 2."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.unit.core.test_bad_inputs import make_inventory, with_settings


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("key", ["ansible_ssh_common_args", "ansible_ssh_extra_args"])
def test_ssh_args_are_split_like_ansible_and_never_reach_a_shell(key: str, tmp_path: Path, artifacts: Path) -> None:
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    marker = tmp_path / "M"
    host = {
        "ansible_host": "127.0.0.1",
        "ansible_port": closed_port(),
        "ansible_user": "root",
        key: f"-o ConnectTimeout=3 $(touch {marker}) `touch {marker}`;touch {marker}",
    }
    settings = with_settings(node_classes__v100__gpu_count=0)
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gn01": host}}}, settings=settings)
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(artifacts), timeout=120)
    assert not marker.exists(), "inventory text ran in a local shell"
    assert "Traceback" not in done.stderr
    # ssh itself got the text as arguments (and refused or failed on them): the host is an error, not a pass.
    assert done.returncode in (1, 3), done.stderr


@pytest.mark.parametrize("port", ["22;touch M", "0", "70000", True])
def test_a_port_that_is_not_a_number_is_one_line(port: object, tmp_path: Path, artifacts: Path) -> None:
    host = {"ansible_host": "127.0.0.1", "ansible_port": port, "ansible_user": "root"}
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gn01": host}}})
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(artifacts), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    # Refused where the inventory is loaded, before any connection: one line naming the host and the value.
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("gpuready: error: ") and line.endswith("(1-65535)"), line
    assert f"host gn01: ansible_port {port!r} is not a TCP port" in line, line
    assert not (tmp_path / "M").exists()
