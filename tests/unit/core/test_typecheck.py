"""The type checker of `make test` (scripts/typecheck: mypy, strict on gpuready.core and gpuready.validate) passes
on this tree and fails on a type error planted in a copy of it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, require

pytestmark = pytest.mark.slow


def copy_tree(into: Path) -> Path:
    """The package sources and pyproject.toml, and the checker's cache of this tree (so only what changed is read)."""
    import tomllib

    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.copy2(ROOT / "pyproject.toml", into / "pyproject.toml")
    for folder in set(mapping.values()):
        shutil.copytree(ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__"))
    cache = ROOT / ".venv" / "typecheck" / "mypy-cache"
    if cache.is_dir():
        shutil.copytree(cache, into / ".venv" / "typecheck" / "mypy-cache")
    return into


def typecheck(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "typecheck"), str(repo)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_type_checker_fails_on_a_planted_type_error(tmp_path: Path) -> None:
    require(importlib.util.find_spec("mypy"), "mypy (the dev extra)")
    repo = copy_tree(tmp_path)
    clean = typecheck(repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # The planted fault: a function of core/redact.py that returns a str where it declares an int.
    with (repo / "core" / "redact.py").open("a") as f:
        f.write('\n\ndef planted() -> int:\n    return "not a number"\n')
    planted = typecheck(repo)
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "core/redact.py" in planted.stdout
    assert "[return-value]" in planted.stdout


def test_the_type_checker_is_strict_on_validate(tmp_path: Path) -> None:
    require(importlib.util.find_spec("mypy"), "mypy (the dev extra)")
    repo = copy_tree(tmp_path)
    # The planted fault: a function of validate/node/marks.py without annotations, which strict mode refuses.
    with (repo / "validate" / "node" / "marks.py").open("a") as f:
        f.write("\n\ndef planted(value):\n    return value\n")
    planted = typecheck(repo)
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "validate/node/marks.py" in planted.stdout
    assert "[no-untyped-def]" in planted.stdout
