"""Every shell script of the project passes shellcheck (Debian's package; scripts/install-system-deps installs it):
the scripts CI and the quick start run, the GPU runbook, and the shell files the roles send to nodes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, require

SHEBANG = ("#!/bin/sh", "#!/bin/bash", "#!/usr/bin/env bash", "#!/usr/bin/env sh")


def shell_scripts(root: Path) -> list[Path]:
    """Tracked files that are shell: named *.sh, or starting with a shell's #! line."""
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    found = []
    for name in tracked.split():
        path = root / name
        if not path.is_file() or path.is_symlink():
            continue
        if path.suffix == ".sh":
            found.append(path)
            continue
        with path.open("rb") as f:
            first = f.readline(64).decode("latin-1").strip()
        if first.startswith(SHEBANG):
            found.append(path)
    return sorted(found)


SCRIPTS = shell_scripts(ROOT)


def test_the_scripts_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in SCRIPTS}
    assert {".ci/run", "scripts/test", "benchmarks/gpu/runbook.sh"} <= names, names


@pytest.mark.parametrize("script", SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in SCRIPTS])
def test_shellcheck_finds_nothing(script: Path) -> None:
    require(shutil.which("shellcheck"), "shellcheck is not installed (scripts/install-system-deps installs it)")
    done = subprocess.run(
        ["shellcheck", "-f", "gcc", str(script.relative_to(ROOT))], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
