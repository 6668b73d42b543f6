"""The roles' raw reads over real SSH: without a terminal, so their output parses as it does locally.

Ansible's ssh connection runs raw commands with `ssh -tt` unless ansible_ssh_use_tty is false; in a
terminal every line ends in CRLF and stderr is mixed into stdout. The driver role's apt read is parsed
by section headers, so over a terminal it would fail on every SSH node while the chroot and local
tests stay green. The node is a namespace host of the lab (sshd in its own network namespace, this
machine's files), so its dpkg is this machine's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuready.core.runner import ansible_environment
from tests.conftest import ModuleTmp, require
from tests.integration.node.conftest import start
from tests.unit.provision.local_play import collection_filter

pytestmark = [pytest.mark.root, pytest.mark.slow]

file_states = collection_filter("file_states")

#: Files of any Debian system: regular, a link, a folder (what the roles' file read meets).
PATHS = ["/etc/debian_version", "/etc/os-release", "/etc/apt/sources.list.d", "/etc/no-such-file"]
COMPARED = ("isreg", "isdir", "islnk", "mode", "pw_name", "gr_name", "checksum")

BIN = Path(shutil.which("ansible-playbook") or "ansible-playbook").parent


@pytest.fixture(scope="module")
def node(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    yield from start(module_tmp("ssh-node"), ["a100-x4"])


@pytest.fixture(scope="module", params=["root", "nobody"])
def ssh_reads(node: dict[str, Any], module_tmp: ModuleTmp, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The roles' reads, run once over SSH (as the SSH user, and through sudo as another user, as
    ansible_become runs them), with ansible.builtin.find's answer for the same files."""
    require(shutil.which("dpkg-query") is not None, "the apt read needs a Debian or Ubuntu machine")
    user = request.param
    become = {"become": True, "become_user": user} if user != "root" else {}
    if become:
        require(shutil.which("sudo") is not None, "become needs sudo (scripts/install-system-deps)")
    tmp_path = module_tmp("ssh-reads")
    out = tmp_path / "read.json"
    play = [
        {
            "hosts": "gpu_nodes",
            "gather_facts": True,
            "gather_subset": ["min"],
            **become,
            "vars": {"nvidia_driver_plan": {"headers": [], "packages": ["bash=5*"], "running_kernel_modules": []}},
            "tasks": [
                {
                    "ansible.builtin.include_role": {
                        "name": "gpuready.gpu.nvidia_driver",
                        "tasks_from": "read-packages",
                    }
                },
                {
                    "ansible.builtin.raw": "id -un",
                    "vars": {"ansible_ssh_use_tty": False},
                    "register": "who",
                    "changed_when": False,
                },
                {
                    "ansible.builtin.raw": "{{ paths | gpuready.gpu.file_read_command }}",
                    "vars": {"paths": PATHS, "ansible_ssh_use_tty": False},
                    "register": "read",
                    "changed_when": False,
                },
                {
                    "ansible.builtin.find": {
                        "paths": sorted({str(Path(p).parent) for p in PATHS}),
                        "patterns": [Path(p).name for p in PATHS],
                        "file_type": "any",
                        "get_checksum": True,
                    },
                    "register": "found",
                },
                {
                    "ansible.builtin.copy": {
                        "content": "{{ {'packages': nvidia_driver_installed_packages, 'apt': nvidia_driver_apt,"
                        " 'stdout': nvidia_driver_apt_read.stdout, 'read': read.stdout,"
                        " 'found': found.files, 'who': who.stdout | trim} | to_json }}",
                        "dest": str(out),
                        "mode": "0600",
                    },
                    "delegate_to": "localhost",
                    "become": False,
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                    },
                },
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(node["inventory"] / "hosts.yml"), "play.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**ansible_environment(tmp_path), "HOME": str(tmp_path)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    read = json.loads(out.read_text())
    assert read["who"] == user
    return read


def test_the_apt_read_parses_over_ssh(ssh_reads: dict[str, Any]) -> None:
    read = ssh_reads
    assert "\r" not in read["stdout"], "the read ran in a terminal (CRLF line ends)"
    bash = subprocess.run(
        ["dpkg-query", "--show", "--showformat=${Version}", "bash"], capture_output=True, text=True, check=True
    ).stdout
    assert [p["version"] for p in read["packages"]["bash"]] == [bash]
    assert read["apt"]["pinned"]["bash"].startswith("5"), read["apt"]["pinned"]


def _states(files: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["path"]: {k: f.get(k) for k in COMPARED} for f in files if f["path"] in PATHS}


def test_the_file_read_reads_what_find_reads_over_ssh(ssh_reads: dict[str, Any]) -> None:
    read = _states(file_states(ssh_reads["read"]))
    assert "\r" not in ssh_reads["read"]
    assert read == _states(ssh_reads["found"])
    assert set(read) == {p for p in PATHS if Path(p).exists() or Path(p).is_symlink()}
