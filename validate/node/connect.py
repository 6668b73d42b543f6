"""Reach a host the way Ansible would from the inventory: its connection variables to a testinfra host.

Read as Ansible's ssh connection plugin reads them: ``ansible_host``, ``ansible_port``, ``ansible_user``
(unset: ssh's own default and ~/.ssh/config, never an assumed root), ``ansible_ssh_private_key_file``,
``ansible_ssh_common_args`` and ``ansible_ssh_extra_args`` (ProxyJump/ProxyCommand jump hosts go there),
``ansible_host_key_checking`` (else ``ANSIBLE_HOST_KEY_CHECKING``, else on, Ansible's default), and
``ansible_become`` with ``ansible_become_user`` / ``ansible_become_method`` (sudo, non-interactive).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import threading
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
        raise BadInput(
            f"host {name}: ansible_connection {connection!r} is not supported by validate gpu-node (ssh or local)"
        )
    become = _flag(variables.get("ansible_become"), False)
    method = str(variables.get("ansible_become_method", "sudo"))
    if become and method != "sudo":
        raise BadInput(f"host {name}: ansible_become_method {method!r} is not supported by validate gpu-node (sudo)")
    checking = variables.get("ansible_host_key_checking", variables.get("ansible_ssh_host_key_checking"))
    spec: dict[str, Any] = {
        "name": name,
        "connection": "local" if connection == "local" else "ssh",
        "address": str(variables.get("ansible_host", name)),
        "port": _port(name, variables.get("ansible_port", 22)),
        "user": str(variables.get("ansible_user", "") or ""),
        "key": str(variables.get("ansible_ssh_private_key_file", "") or ""),
        "extra": [arg for key in SSH_ARG_VARS for arg in _split(name, key, variables)],
        "host_key_checking": _flag(checking, _flag(env.get("ANSIBLE_HOST_KEY_CHECKING"), True)),
        "become_user": str(variables.get("ansible_become_user", "root")) if become else "",
    }
    for key in ("address", "user", "key", "become_user"):
        if "{{" in spec[key]:
            raise BadInput(f"host {name}: {key} is templated ({spec[key]!r}); validate gpu-node needs plain values")
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
        raise BadInput(f"host {name}: {key} is templated ({value!r}); validate gpu-node needs plain values")
    try:
        return [arg.strip() for arg in shlex.split(value) if arg.strip()]
    except ValueError as e:
        raise BadInput(f"host {name}: {key} {value!r}: cannot split it into ssh arguments: {e}") from None


def ssh_args(spec: dict[str, Any]) -> str:
    """The extra ssh arguments as one string for testinfra, which pastes it into a command line for /bin/sh:
    the inventory's arguments are each quoted, so the shell hands them to ssh unchanged and runs none of them."""
    ours = [SSH_OPTIONS, "" if spec["host_key_checking"] else NO_HOST_KEY_CHECKING]
    return " ".join(filter(None, [*ours, shlex.join(spec["extra"])]))


def testinfra_host(spec: dict[str, Any], timeout: int) -> Any:
    import testinfra

    if spec["connection"] == "local":
        return testinfra.get_host("local://")
    # No ControlMaster: the catalogue's commands travel in one batch (Node.prefetch), so a host costs one
    # handshake anyway, and a master forked by testinfra would hold its output pipe open for ControlPersist.
    kwargs: dict[str, Any] = {"ssh_extra_args": ssh_args(spec), "timeout": timeout, "controlpersist": 0}
    if spec["key"]:
        kwargs["ssh_identity_file"] = str(Path(spec["key"]).expanduser())
    user = f"{spec['user']}@" if spec["user"] else ""
    return testinfra.get_host(f"ssh://{user}{spec['address']}:{spec['port']}", **kwargs)


def command_line(spec: dict[str, Any], timeout: int, script: str) -> list[str]:
    """The argv that runs ``script`` on the host: ssh with the same options testinfra's host gets, or sh here."""
    if spec["connection"] == "local":
        return ["sh", "-c", script]
    argv = ["ssh", *shlex.split(ssh_args(spec))]
    if "connecttimeout" not in " ".join(spec["extra"]).lower():
        argv += ["-o", f"ConnectTimeout={timeout}"]
    if spec["user"]:
        argv += ["-o", f"User={spec['user']}"]
    argv += ["-o", f"Port={spec['port']}"]
    if spec["key"]:
        argv += ["-i", str(Path(spec["key"]).expanduser())]
    return [*argv, spec["address"], script]


class Session:
    """A script running on a host over one connection, its output read as it comes: the node's fixed commands
    answer first, and the measuring commands that follow on the same connection are read when asked for.

    Its errors go to a file (nothing waits on a pipe nobody reads). Its standard input is a pipe held open until
    :meth:`close` or :meth:`abort`: the script's watchdog (``Node.batch``, watched) stops what it runs on the node
    when that input ends, also when gpuready is killed or its connection drops. It runs in a session of its own
    (the watchdog signals its own process group: on the local connection that must not be gpuready's); a cancelled
    run ends it with the rest of gpuready's children (``core/cancel.py``)."""

    def __init__(self, argv: list[str]) -> None:
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - held until close(), past this method
        self._process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            start_new_session=True,
        )

    def until_end(self, end: str) -> tuple[bytes, int | None]:
        """What the script printed up to its next line that starts with ``end``, and the exit status written after
        ``end`` on that line; None for the status when the output ended first. Bytes: each answer in it is decoded
        on its own (a node's junk byte is counted in the answer that printed it)."""
        assert self._process.stdout is not None
        marker = end.encode()
        lines: list[bytes] = []
        for line in iter(self._process.stdout.readline, b""):
            if line.startswith(marker):
                status = line[len(marker) :].strip()
                data = b"".join(lines)
                # The end mark's own line feed before it is the mark's, not the last command's.
                return data[:-1] if data.endswith(b"\n") else data, int(status) if status.isdigit() else None
            lines.append(line)
        return b"".join(lines), None

    def finish(self) -> tuple[int, str]:
        """Wait for the script to end (its output read to the end first): its exit status and its errors."""
        assert self._process.stdout is not None
        self._process.stdout.read()
        rc = self._process.wait()
        self._errors.seek(0)
        return rc, self._errors.read().decode("utf-8", "replace")

    def abort(self, kill_after: float | None = None) -> None:
        """Ask the node to stop the script now (its input ends; its watchdog stops what it runs). Safe from another
        thread than the one reading: the reader then sees the output end. ``kill_after``: seconds after which the
        local end (ssh, or the local script's process group) is killed if it has not ended by then (a node whose
        sudo hangs before the watchdog starts; the dropped connection still ends the watchdog's input)."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self._process.stdin.close()
        if kill_after is not None:
            timer = threading.Timer(kill_after, self._kill_group)
            timer.daemon = True
            timer.start()

    def _kill_group(self) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)

    def close(self) -> None:
        """End the script: its input ends (the node stops what it still runs), a moment to finish (removing its
        scratch folder), then killed."""
        self.abort()
        try:
            self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._errors.close()


def start(spec: dict[str, Any], timeout: int, script: str) -> Session:
    """``script`` started on the host over one connection (see :class:`Session`)."""
    return Session(command_line(spec, timeout, script))


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
