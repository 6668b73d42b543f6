"""The quick start as a first-time user meets it: `make demo` says what it does and how long it took, shows the
environments before it builds the training dependencies, and the README says how `gpuready` gets on the PATH."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT


def _planned(target: str, venv: Path) -> list[str]:
    """What `make TARGET` would run for a fresh virtual environment (make -n), one command a line."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\\\n", " ").splitlines()


def test_make_demo_shows_the_environments_before_it_builds_tensorflow_and_horovod(tmp_path: Path) -> None:
    plan = _planned("demo", tmp_path / "venv")
    first = plan.index("scripts/demo environments")
    building = [i for i, line in enumerate(plan) if "tensorflow==" in line or "horovod==" in line]
    assert building and all(i > first for i in building), plan
    assert plan.index("scripts/demo training") > max(building), plan


def test_make_says_what_each_long_step_does_instead_of_its_command_line(tmp_path: Path) -> None:
    plan = _planned("demo", tmp_path / "venv")
    # The sub-make that builds the training dependencies plans the base install again under -n.
    long_steps = {line for line in plan if re.search(r"pip install -q (-e|'tensorflow|--no-build-isolation)", line)}
    assert len(long_steps) == 3, plan
    assert all(line.startswith('scripts/timed "') for line in long_steps), long_steps
    horovod = next(line for line in long_steps if "horovod" in line)
    assert "minutes" in horovod.split('"')[1], horovod


def test_timed_says_what_it_runs_and_how_long_it_took_and_passes_a_failure_on() -> None:
    done = subprocess.run(
        [ROOT / "scripts/timed", "waiting a second", "sleep", "1"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    lines = done.stdout.strip().splitlines()
    assert "== waiting a second" in lines[0] and re.fullmatch(r" {3}done in 0m 0[12]s", lines[-1]), lines
    failed = subprocess.run([ROOT / "scripts/timed", "failing", "false"], capture_output=True, text=True, timeout=30)
    assert failed.returncode == 1 and "done in" not in failed.stdout


def test_demo_refuses_an_unknown_part_in_one_line() -> None:
    done = subprocess.run([ROOT / "scripts/demo", "everything"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr == "usage: scripts/demo [environments|training]\n"


def test_the_readme_puts_gpuready_on_the_path_right_after_the_quick_start_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme[readme.index("make demo") :].split("```")[0]
    venv = re.search(r"^VENV\s*\?=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert venv, "the Makefile names no VENV"
    assert f". {venv.group(1)}/bin/activate" in quick_start, quick_start
    assert (ROOT / "scripts/demo").read_text().count(f". {venv.group(1)}/bin/activate") == 1
