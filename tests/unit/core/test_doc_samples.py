"""The docs' console samples are what the commands print: scripts/record-doc-samples re-runs each one and
compares (run folders, times and sizes normalised)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "record-doc-samples"
START = "<!-- recorded: run by scripts/record-doc-samples -->"


def check(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_every_recorded_sample_still_matches_what_its_commands_print() -> None:
    assert START in (ROOT / "README.md").read_text()  # the tour's sample is one of them
    done = check()
    assert done.returncode == 0, done.stdout + done.stderr


def _page(tmp_path: Path, output: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    page = tmp_path / "page.md"
    page.write_text(
        f"Text.\n\n{START}\n```console\n$ gpuready inventory init --only local\n{output}```\n"
        "<!-- /recorded -->\n\nMore text.\n"
    )
    return page


def test_a_sample_that_no_longer_matches_fails_the_check_with_a_diff(tmp_path: Path) -> None:
    printed = "inventories/local\nnext: gpuready inventory check -i inventories/local\n"
    assert check(_page(tmp_path, printed)).returncode == 0
    stale = printed.replace("check -i", "check --inventory")  # one line the command no longer prints
    done = check(_page(tmp_path, stale))
    assert done.returncode == 1
    assert "-next: gpuready inventory check --inventory inventories/local" in done.stdout
    assert "+next: gpuready inventory check -i inventories/local" in done.stdout


def test_recording_rewrites_only_the_sample(tmp_path: Path) -> None:
    page = _page(tmp_path, "stale\n")
    done = subprocess.run([sys.executable, str(SCRIPT), str(page)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = "inventories/local\nnext: gpuready inventory check -i inventories/local\n"
    assert page.read_text() == _page(tmp_path / "again", printed).read_text()
