"""Hosts are reached as Ansible's ssh connection plugin would reach them from the same variables."""

from __future__ import annotations

import itertools
import shlex

import pytest

from gpuready.core.errors import BadInput
from gpuready.core.inventory import connection


def test_no_assumed_root_and_ansibles_default_host_key_checking() -> None:
    spec = connection.connection_spec("gn01", {"ansible_host": "10.0.0.5"}, environ={})
    assert (spec["user"], spec["host_key_checking"], spec["become_user"]) == ("", True, "")
    assert "StrictHostKeyChecking=no" not in connection.ssh_args(spec)
    assert connection.describe(spec) == "ssh 10.0.0.5:22"


@pytest.mark.parametrize(
    ("variables", "environ", "checking"),
    [
        ({"ansible_host_key_checking": False}, {}, False),
        ({"ansible_ssh_host_key_checking": "no"}, {}, False),
        ({}, {"ANSIBLE_HOST_KEY_CHECKING": "False"}, False),
        ({"ansible_host_key_checking": True}, {"ANSIBLE_HOST_KEY_CHECKING": "False"}, True),
    ],
)
def test_host_key_policy_as_ansible_reads_it(variables: dict, environ: dict, checking: bool) -> None:
    spec = connection.connection_spec("gn01", variables, environ=environ)
    assert spec["host_key_checking"] is checking
    assert ("UserKnownHostsFile=/dev/null" in connection.ssh_args(spec)) is not checking


def test_jump_host_and_extra_args_reach_ssh() -> None:
    spec = connection.connection_spec(
        "gn01",
        {
            "ansible_user": "ops",
            "ansible_ssh_common_args": "-o ProxyJump=bastion",
            "ansible_ssh_extra_args": "-o Compression=yes",
        },
        environ={},
    )
    assert connection.ssh_args(spec).endswith("-o ProxyJump=bastion -o Compression=yes")
    assert connection.describe(spec) == "ssh ops@gn01:22"


def test_become_runs_the_batch_through_sudo() -> None:
    spec = connection.connection_spec("gn01", {"ansible_user": "ops", "ansible_become": "yes"}, environ={})
    assert spec["become_user"] == "root"
    wrapped = connection.become(spec, "nvidia-smi -q -x; dmesg")
    assert shlex.split(wrapped) == ["sudo", "-n", "-H", "-u", "root", "--", "sh", "-c", "nvidia-smi -q -x; dmesg"]
    plain = connection.connection_spec("gn01", {"ansible_become": False}, environ={})
    assert connection.become(plain, "dmesg") == "dmesg"


def test_unsupported_become_method_is_bad_input() -> None:
    with pytest.raises(BadInput, match="ansible_become_method 'su'"):
        connection.connection_spec("gn01", {"ansible_become": True, "ansible_become_method": "su"}, environ={})


def test_progress_lines_at_1000_hosts() -> None:
    from gpuready.validate.gpu_node import worth_a_line
    from gpuready.validate.node.fanout import HostDone

    lines = [d for d in range(1, 1001) if worth_a_line(HostDone(f"gn{d}", d, 1000, int(d in (7, 512)), 1.0))]
    assert lines == [7, 250, 500, 512, 750, 1000]
    # A small run too: its lines share the screen with its verdict.
    assert [d for d in range(1, 13) if worth_a_line(HostDone("h", d, 12, 0, 1.0))] == [3, 6, 9, 12]
    assert [d for d in range(1, 3) if worth_a_line(HostDone("h", d, 2, 0, 1.0))] == [1, 2]
    # Every host failing: the first 3 are named, then only the quarters of the run (with the count so far).
    lines = [d for d in range(1, 1001) if worth_a_line(HostDone(f"gn{d}", d, 1000, 1, 1.0), failing_so_far=d)]
    assert lines == [1, 2, 3, 250, 500, 750, 1000]


def test_the_sessions_ssh_command_line_is_the_inventorys_without_a_shell() -> None:
    # The argv ssh gets for the host's one session: our options, the inventory's arguments each as one argument
    # (a ProxyCommand with spaces, % tokens and $(...) reaches ssh as written, no shell reads it), user, port, key.
    spec = connection.connection_spec(
        "gn01",
        {
            "ansible_host": "10.0.0.5",
            "ansible_port": 2222,
            "ansible_user": "ops",
            "ansible_ssh_private_key_file": "/keys/id",
            "ansible_ssh_common_args": "-o ProxyCommand='ssh -W %h:%p $(whoami)@bastion'",
        },
        environ={},
    )
    argv = connection.command_line(spec, 7, "nvidia-smi -q -x")
    assert argv[0] == "ssh" and argv[-2:] == ["10.0.0.5", "nvidia-smi -q -x"]
    assert "ProxyCommand=ssh -W %h:%p $(whoami)@bastion" in argv and "BatchMode=yes" in argv
    options = list(itertools.pairwise(argv))
    for pair in [("-o", "ConnectTimeout=7"), ("-o", "User=ops"), ("-o", "Port=2222"), ("-i", "/keys/id")]:
        assert pair in options, pair
    # A ConnectTimeout of the inventory's is left to stand; a local host is run by sh here.
    spec["extra"] = ["-o", "ConnectTimeout=3"]
    assert "ConnectTimeout=7" not in connection.command_line(spec, 7, "true")
    local = connection.connection_spec("localhost", {"ansible_connection": "local"}, environ={})
    assert connection.command_line(local, 7, "id -un") == ["sh", "-c", "id -un"]
