"""Reach a host for the node checks: a testinfra host, or one ssh session running a script, built from the
host's connection spec (:mod:`gpuready.core.inventory.connection`, the one reader of the connection variables).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from gpuready.core.inventory.connection import command_line, ssh_args


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
