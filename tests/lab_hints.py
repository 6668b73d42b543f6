"""The shell lines `gpuready lab up` prints for each component, run exactly as printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def printed_hints(stderr: str) -> list[str]:
    """The lines `lab up` prints under a component (indented by two spaces), comments left out."""
    lines = [line[2:] for line in stderr.splitlines() if line.startswith("  ")]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def run_hints(stderr: str, cwd: Path, timeout: int = 600) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """Run each printed command in bash, in ``cwd``, with this Python's ``gpuready`` first on PATH; the
    ``export`` lines printed before a command are run before it, as in the user's shell."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    exports: list[str] = []
    done = []
    for line in printed_hints(stderr):
        if line.startswith("export "):
            exports.append(line)
            continue
        script = "\n".join([*exports, line])
        ran = subprocess.run(
            ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        done.append((line, ran))
    return done
