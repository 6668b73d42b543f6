"""`gpuready lab build`: a Go build shows that it still runs, in a pipe and on a terminal.

A real build of govmomi's vcsim and govc into an empty gpuready cache; Go's own compile cache is the
user's, so the packages come from it and the build is mostly linking: on a fast machine with a warm compile cache
about a second, so these tests ask for a line every 0.2 s and never assume how long a build lasts. That a terminal
refreshes every second while a pipe waits 30 s is tested without a build, on a stream that says it is a terminal.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready, require


def _env(tmp_path: Path) -> dict[str, str]:
    from gpuready.lab.gobuild import GO_FALLBACK

    go = shutil.which("go") or str(GO_FALLBACK)
    require(shutil.which("go") or GO_FALLBACK.exists(), "Go is not installed (https://go.dev/dl/)")
    gocache = subprocess.run([go, "env", "GOCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "GOCACHE": gocache, "GPUREADY_PROGRESS_SECONDS": "0.2"}


def test_a_build_in_a_pipe_prints_a_line_every_few_seconds_while_it_runs(tmp_path: Path) -> None:
    done = gpuready("lab", "build", "--components", "vsphere", env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    ticks = [line for line in lines if re.fullmatch(r"build govmomi v[\d.]+ \(go build\): still running, \d+s", line)]
    assert len(ticks) >= 2, done.stderr
    # the elapsed time grows, and the build's start and end are said around the ticks
    seconds = [int(t.rsplit(" ", 1)[1].rstrip("s")) for t in ticks]
    assert seconds == sorted(seconds)
    start = next(i for i, line in enumerate(lines) if "building govmomi" in line)
    end = next(i for i, line in enumerate(lines) if "built govmomi" in line)
    assert start < lines.index(ticks[0]) and lines.index(ticks[-1]) < end
    assert "\r" not in done.stderr  # a pipe gets whole lines, never a refreshing one
    assert done.stdout.startswith("vsphere: ")


def test_a_build_on_a_terminal_refreshes_one_line(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "gpuready.core.cli", "lab", "build", "--components", "vsphere"],
        cwd=ROOT,
        env={**os.environ, **_env(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=follower,
        stdin=subprocess.DEVNULL,
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif child.poll() is not None:
            break
    os.close(leader)
    assert child.wait(timeout=60) == 0, seen.decode(errors="replace")
    text = seen.decode(errors="replace")
    refreshes = re.findall(r"\rbuild govmomi v[\d.]+ \(go build\): (\d+)s\x1b\[K", text)
    # one line rewritten in place, never a new line per tick
    assert len(refreshes) >= 2, text
    assert "still running" not in text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_refreshes_every_second_where_a_pipe_would_wait_thirty(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuready.lab.gobuild import showing_progress

    monkeypatch.delenv("GPUREADY_PROGRESS_SECONDS", raising=False)
    terminal, pipe = _Terminal(), io.StringIO()
    # Until the terminal has refreshed twice, however slow this machine: well inside the pipe's 30 s.
    deadline = time.monotonic() + 20
    with showing_progress("build x (go build)", terminal), showing_progress("build x (go build)", pipe):
        while len(refreshes := re.findall(r"\rbuild x \(go build\): (\d+)s\x1b\[K", terminal.getvalue())) < 2:
            assert time.monotonic() < deadline, terminal.getvalue()
            time.sleep(0.1)
    assert refreshes == sorted(refreshes, key=int), terminal.getvalue()
    assert int(refreshes[0]) < 10, terminal.getvalue()  # the first refresh a second in, not after the pipe's 30
    assert terminal.getvalue().endswith("\r\x1b[K")  # the line is wiped when the build ends
    assert pipe.getvalue() == ""
