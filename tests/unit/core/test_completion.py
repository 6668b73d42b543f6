"""Shell completion as docs/commands.md tells a user to set it up: the script gpuready prints, sourced into
a real bash, completes commands, subcommands and options."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BIN = Path(sys.executable).parent
#: The bash line docs/commands.md gives, used as given.
BASH_SETUP = 'eval "$(_GPUREADY_COMPLETE=bash_source gpuready)"'


def complete(words: str) -> list[str]:
    """What bash offers after ``words`` (the last word is the one being completed; '' for a new one)."""
    parts = words.split(" ")
    script = (
        f"{BASH_SETUP}\n"
        f"COMP_WORDS=({' '.join(repr(p) for p in parts)}); COMP_CWORD={len(parts) - 1}\n"
        "_gpuready_completion gpuready\n"
        "printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(not (BIN / "gpuready").exists() or not shutil.which("bash"), reason="needs gpuready and bash")
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ("gpuready val", ["validate"]),
        ("gpuready validate gp", ["gpu-node"]),
        ("gpuready inventory ", ["check", "init"]),
        ("gpuready validate gpu-node --on", ["--only"]),
        ("gpuready lab up --comp", ["--components"]),
    ],
)
def test_bash_completes_commands_and_options(words: str, offered: list[str]) -> None:
    assert complete(words) == offered


def test_the_docs_show_the_line_that_sets_it_up() -> None:
    doc = (ROOT / "docs" / "commands.md").read_text()
    assert BASH_SETUP in doc
    for shell in ("zsh", "fish"):
        assert f"_GPUREADY_COMPLETE={shell}_source gpuready" in doc
        done = subprocess.run(
            [str(BIN / "gpuready")], env={**os.environ, "_GPUREADY_COMPLETE": f"{shell}_source"}, capture_output=True
        )
        assert done.returncode == 0 and b"_GPUREADY_COMPLETE" in done.stdout, done.stderr
