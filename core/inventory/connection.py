"""How to reach a host, read from its Ansible connection variables: the one reader for everything that connects
(``validate gpu-node``, the ssh training launcher).

Read as Ansible's ssh connection plugin reads them: ``ansible_host``, ``ansible_port``, ``ansible_user``
(unset: ssh's own default and ~/.ssh/config, never an assumed root), ``ansible_ssh_private_key_file``,
``ansible_ssh_common_args`` and ``ansible_ssh_extra_args`` (ProxyJump/ProxyCommand jump hosts go there),
``ansible_host_key_checking`` (else ``ANSIBLE_HOST_KEY_CHECKING``, else on, Ansible's default), and
``ansible_become`` with ``ansible_become_user`` / ``ansible_become_method`` (sudo, non-interactive).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput

SSH_OPTIONS = "-o BatchMode=yes -o LogLevel=ERROR -o ServerAliveInterval=5 -o ServerAliveCountMax=2"
NO_HOST_KEY_CHECKING = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
#: Split by Ansible's ssh connection plugin with shlex, no shell (ansible.plugins.connection.ssh._split_ssh_args).
SSH_ARG_VARS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
FALSE = ("0", "false", "no", "off", "n", "f")


def _flag(value: Any, default: bool) -> bool:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in FALSE


def address(name: str, variables: Mapping[str, Any]) -> str:
    """The address a host is reached at: ``ansible_host``, else its inventory name (as Ansible reaches it)."""
    return str(variables.get("ansible_host") or name)


def connection_spec(name: str, variables: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The parts of a host's Ansible variables that say how to reach it (plain values, JSON-able)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    # No implicit local connection for a host named localhost, 127.0.0.1 or ::1: Ansible makes its implicit
    # localhost (ansible_connection: local) only for one the inventory does not define. "You can override the
    # built-in implicit version by creating a localhost host entry in your inventory. At that point, all
    # implicit behaviors are ignored; the localhost in inventory is treated just like any other host."
    # (https://docs.ansible.com/ansible/latest/inventory/implicit_localhost.html). Every host validated here
    # is in the inventory, so one without ansible_connection is reached over ssh, as Ansible reaches it.
    connection = variables.get("ansible_connection", "ssh")
    if connection not in ("ssh", "smart", "paramiko", "local"):
        raise BadInput(f"host {name}: ansible_connection {connection!r} is not supported by gpuready (ssh or local)")
    become = _flag(variables.get("ansible_become"), False)
    method = str(variables.get("ansible_become_method", "sudo"))
    if become and method != "sudo":
        raise BadInput(f"host {name}: ansible_become_method {method!r} is not supported by gpuready (sudo)")
    checking = variables.get("ansible_host_key_checking", variables.get("ansible_ssh_host_key_checking"))
    spec: dict[str, Any] = {
        "name": name,
        "connection": "local" if connection == "local" else "ssh",
        "address": address(name, variables),
        "port": _port(name, variables.get("ansible_port", 22)),
        "user": str(variables.get("ansible_user", "") or ""),
        "key": str(variables.get("ansible_ssh_private_key_file", "") or ""),
        "extra": [arg for key in SSH_ARG_VARS for arg in _split(name, key, variables)],
        "host_key_checking": _flag(checking, _flag(env.get("ANSIBLE_HOST_KEY_CHECKING"), True)),
        "become_user": str(variables.get("ansible_become_user", "root")) if become else "",
    }
    for key in ("address", "user", "key", "become_user"):
        if "{{" in spec[key]:
            raise BadInput(f"host {name}: {key} is templated ({spec[key]!r}); gpuready needs plain values")
    return spec


def _port(name: str, value: Any) -> int:
    """``ansible_port`` as a TCP port number (Ansible would fail on anything else when it connects)."""
    try:
        port = int(str(value).strip()) if not isinstance(value, bool) else -1
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise BadInput(f"host {name}: ansible_port {value!r} is not a port number (1-65535)")
    return port


def _split(name: str, key: str, variables: dict[str, Any]) -> list[str]:
    """An ssh arguments variable split into arguments as Ansible's ssh connection plugin splits it (shlex, no
    shell): ``$(...)``, backticks and ``;`` stay literal text inside one argument."""
    value = str(variables.get(key, "") or "")
    if "{{" in value:
        raise BadInput(f"host {name}: {key} is templated ({value!r}); gpuready needs plain values")
    try:
        return [arg.strip() for arg in shlex.split(value) if arg.strip()]
    except ValueError as e:
        raise BadInput(f"host {name}: {key} {value!r}: cannot split it into ssh arguments: {e}") from None


def ssh_args(spec: dict[str, Any]) -> str:
    """The extra ssh arguments as one string for testinfra, which pastes it into a command line for /bin/sh:
    the inventory's arguments are each quoted, so the shell hands them to ssh unchanged and runs none of them."""
    ours = [SSH_OPTIONS, "" if spec["host_key_checking"] else NO_HOST_KEY_CHECKING]
    return " ".join(filter(None, [*ours, shlex.join(spec["extra"])]))


def ssh_options(spec: dict[str, Any], timeout: int, known_hosts: Path | None = None) -> list[str]:
    """The ssh options that reach the host, as separate arguments: ours, the host key policy, the inventory's
    own arguments (a jump host among them), then connect timeout (unless the inventory sets one), user, port, key.

    With host key checking on, ``known_hosts`` (when given) is a file of the caller's own where a first contact
    is recorded (accept-new), so ~/.ssh is never edited; without it, ssh's own files and policy apply."""
    argv = shlex.split(SSH_OPTIONS)
    if not spec["host_key_checking"]:
        argv += shlex.split(NO_HOST_KEY_CHECKING)
    elif known_hosts is not None:
        argv += ["-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={known_hosts}"]
    argv += spec["extra"]
    if "connecttimeout" not in " ".join(spec["extra"]).lower():
        argv += ["-o", f"ConnectTimeout={timeout}"]
    if spec["user"]:
        argv += ["-o", f"User={spec['user']}"]
    argv += ["-o", f"Port={spec['port']}"]
    if spec["key"]:
        argv += ["-i", str(Path(spec["key"]).expanduser())]
    return argv


def command_line(spec: dict[str, Any], timeout: int, script: str) -> list[str]:
    """The argv that runs ``script`` on the host: ssh with the same options testinfra's host gets, or sh here."""
    if spec["connection"] == "local":
        return ["sh", "-c", script]
    return ["ssh", *ssh_options(spec, timeout), spec["address"], script]


def become(spec: dict[str, Any], script: str) -> str:
    """``script`` as the become user (sudo -n: a password prompt fails at once instead of hanging)."""
    if not spec.get("become_user"):
        return script
    return f"sudo -n -H -u {shlex.quote(spec['become_user'])} -- sh -c {shlex.quote(script)}"


def describe(spec: dict[str, Any]) -> str:
    if spec["connection"] == "local":
        return "local"
    user = f"{shlex.quote(spec['user'])}@" if spec["user"] else ""
    return f"ssh {user}{spec['address']}:{spec['port']}" + (
        f" (become {spec['become_user']})" if spec.get("become_user") else ""
    )
