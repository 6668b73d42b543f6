"""Find other CPython versions on this machine: on PATH, or installed by pyenv (~/.pyenv/versions)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def find_python(version: str) -> str | None:
    """A python<version> that really runs (a pyenv shim for a version not selected does not)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        shutil.which(f"python{version}"),
        *sorted((str(p) for p in root.glob(f"versions/{version}.*/bin/python{version}")), reverse=True),
    ]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None
