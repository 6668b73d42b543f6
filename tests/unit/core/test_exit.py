"""A command leaves without the interpreter's teardown, and still exits as one that went through it would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LEAVE = """
import atexit, sys
from pathlib import Path
atexit.register(lambda: Path(sys.argv[1]).write_text("exit handler ran"))
sys.stdout.write("written before leaving, not flushed")
from gpuready.core.cli import leave
leave(int(sys.argv[2]))
"""

# Buffered as a command's output is when nobody set PYTHONUNBUFFERED, so the last flush is leave()'s.
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_leave_flushes_runs_the_exit_handlers_and_keeps_the_code(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    done = subprocess.run([sys.executable, "-c", LEAVE, str(marker), "3"], capture_output=True, text=True, env=BUFFERED)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "written before leaving, not flushed"
    assert marker.read_text() == "exit handler ran"


def test_leave_with_the_reader_gone_exits_quietly(tmp_path: Path) -> None:
    """`gpuready ... | head`: the pipe is closed before the last flush; no traceback, the code stays."""
    code = LEAVE.replace('sys.stdout.write("written before leaving, not flushed")', 'sys.stdout.write("x" * 100)')
    reader = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "m"), "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BUFFERED,
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()
    assert reader.wait(timeout=60) == 1
    assert reader.stderr.read() == b""
