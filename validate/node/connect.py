"""Reach a host the way the inventory says: Ansible's connection variables to a testinfra host."""

from __future__ import annotations

import shlex
import subprocess
import tempfile
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


def testinfra_host(spec: dict[str, Any], control_dir: Path, timeout: int) -> Any:
    import testinfra

    if spec["connection"] == "local":
        return testinfra.get_host("local://")
    extra = f"{SSH_OPTIONS} {spec['extra']}".strip()
    kwargs: dict[str, Any] = {"ssh_extra_args": extra, "timeout": timeout, "controlpersist": 60,
                              # ssh multiplexes only with a ControlPath; %C keeps it short and per host.
                              "controlpath": str(control_dir / "%%C")}  # testinfra %-formats it
    if spec["key"]:
        kwargs["ssh_identity_file"] = str(Path(spec["key"]).expanduser())
    return testinfra.get_host(f"ssh://{spec['user']}@{spec['address']}:{spec['port']}", **kwargs)


def open_master(spec: dict[str, Any], control_dir: Path, timeout: int) -> str:
    """Start the host's SSH ControlMaster in the background; returns why it failed ("" when it is up).

    Started here, detached from any pipe: a master forked by testinfra's first command would hold
    that command's output pipe open for ControlPersist seconds, and every run would wait that long.
    """
    if spec["connection"] != "ssh":
        return ""
    argv = ["ssh", *SSH_OPTIONS.split(), *shlex.split(spec["extra"]), "-o", f"ConnectTimeout={timeout}",
            "-o", "ControlMaster=yes", "-o", "ControlPersist=60", "-o", f"ControlPath={control_dir / '%C'}",
            "-p", str(spec["port"]), "-N", "-f"]
    if spec["key"]:
        argv += ["-i", str(Path(spec["key"]).expanduser())]
    argv.append(f"{spec['user']}@{spec['address']}")
    with tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                  timeout=timeout + 5, check=False)
        except subprocess.TimeoutExpired:
            return f"ssh did not connect within {timeout + 5}s"
        err.seek(0)
        message = err.read().decode(errors="replace").strip()
    return "" if done.returncode == 0 else (message or f"ssh exit {done.returncode}")


def close(spec: dict[str, Any], control_dir: Path) -> None:
    """Stop the host's ControlMaster, so no ssh process outlives the run."""
    if spec["connection"] != "ssh":
        return
    subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={control_dir / '%C'}", "-p", str(spec["port"]),
                    f"{spec['user']}@{spec['address']}"], capture_output=True, timeout=10, check=False)


def describe(spec: dict[str, Any]) -> str:
    if spec["connection"] == "local":
        return "local"
    return f"ssh {shlex.quote(spec['user'])}@{spec['address']}:{spec['port']}"
