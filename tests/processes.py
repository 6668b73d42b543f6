"""The process table, read from /proc: which processes a run left behind.

A run is marked by an environment variable every process it starts inherits (ansible-playbook,
its forks, ssh, testinfra's shells), so leftovers are found even after they were re-parented
or moved into their own session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from tests.conftest import ROOT

MARK = "GPUREADY_TEST_RUN"


def new_mark() -> dict[str, str]:
    return {MARK: uuid.uuid4().hex}


def marked(env: dict[str, str]) -> list[str]:
    """Live processes (pid and command line) whose environment carries this run's mark."""
    needle = f"{MARK}={env[MARK]}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_bytes()
            if stat[stat.rfind(b")") + 2 :][:1] == b"Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def leftovers(env: dict[str, str], settle: float = 1.0) -> list[str]:
    """What is still running of the run after ``settle`` seconds (time for the kernel to finish kills)."""
    deadline = time.monotonic() + settle
    while (found := marked(env)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


class Child:
    """gpuready in its own session, its stderr collected line by line as it comes."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpuready.core.cli", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(
            target=lambda: self.lines.extend(iter(self.proc.stderr.readline, "")), daemon=True
        )
        self.reader.start()

    def wait_for(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self.proc.poll() is None, "".join(self.lines)
            assert time.monotonic() < deadline, f"no {text!r} within {timeout}s: {''.join(self.lines)}"
            time.sleep(0.1)

    def signal_and_wait(self, sig: int, limit: float) -> float:
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.reader.join(5)
        took = time.monotonic() - started
        assert took < limit, f"the cancel took {took:.1f}s: {''.join(self.lines)}"
        return took

    @property
    def stderr(self) -> str:
        return "".join(self.lines)
