"""Set-ups the cancel and results tests share: an SSH host that hangs, and an inventory with one."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.core.test_bad_inputs import make_inventory, with_settings


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP listener that accepts and never says a word: an SSH host that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def hanging_inventory(tmp_path: Path, silent_port: int) -> Path:
    """gpu_nodes ``here`` (this machine, answers at once) and ``hangs`` (SSH to the silent port), no GPUs declared."""
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    hosts = {
        "gpu_nodes": {
            "hosts": {
                "here": {"ansible_connection": "local"},
                "hangs": {"ansible_host": "127.0.0.1", "ansible_port": silent_port, "ansible_user": "root"},
            }
        }
    }
    return make_inventory(tmp_path, hosts=hosts, settings=with_settings(node_classes__v100__gpu_count=0))
