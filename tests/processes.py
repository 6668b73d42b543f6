"""The process table, read from /proc: which processes a run left behind.

A run is marked by an environment variable every process it starts inherits (ansible-playbook,
its forks, ssh, testinfra's shells), so leftovers are found even after they were re-parented
or moved into their own session.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

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
