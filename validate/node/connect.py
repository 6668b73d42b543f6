"""Reach a host the way the inventory says: Ansible's connection variables to a testinfra host."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput

SSH_OPTIONS = ("-o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
               "-o ServerAliveInterval=5 -o ServerAliveCountMax=2")


def connection_spec(name: str, variables: dict[str, Any]) -> dict[str, Any]:
    """The parts of a host's Ansible variables that say how to reach it (plain values, JSON-able)."""
    connection = variables.get("ansible_connection", "ssh")
    if name in ("localhost", "127.0.0.1") and "ansible_connection" not in variables:
        connection = "local"
    if connection not in ("ssh", "smart", "paramiko", "local"):
        raise BadInput(f"host {name}: ansible_connection {connection!r} is not supported by validate gpu-node "
                       "(ssh or local)")
    spec = {"name": name, "connection": "local" if connection == "local" else "ssh",
            "address": str(variables.get("ansible_host", name)),
            "port": int(variables.get("ansible_port", 22)),
            "user": str(variables.get("ansible_user", "root")),
            "key": str(variables.get("ansible_ssh_private_key_file", "") or ""),
            "extra": str(variables.get("ansible_ssh_common_args", "") or "")}
    for key in ("address", "user", "key", "extra"):
        if "{{" in spec[key]:
            raise BadInput(f"host {name}: {key} is templated ({spec[key]!r}); validate gpu-node needs plain values")
    return spec


def testinfra_host(spec: dict[str, Any], timeout: int) -> Any:
    import testinfra

    if spec["connection"] == "local":
        return testinfra.get_host("local://")
    extra = f"{SSH_OPTIONS} {spec['extra']}".strip()
    # No ControlMaster: the catalogue's commands travel in one batch (Node.prefetch), so a host costs one
    # handshake anyway, and a master forked by testinfra would hold its output pipe open for ControlPersist.
    kwargs: dict[str, Any] = {"ssh_extra_args": extra, "timeout": timeout, "controlpersist": 0}
    if spec["key"]:
        kwargs["ssh_identity_file"] = str(Path(spec["key"]).expanduser())
    return testinfra.get_host(f"ssh://{spec['user']}@{spec['address']}:{spec['port']}", **kwargs)


def describe(spec: dict[str, Any]) -> str:
    if spec["connection"] == "local":
        return "local"
    return f"ssh {shlex.quote(spec['user'])}@{spec['address']}:{spec['port']}"
