"""A reader that goes away loses nothing: `gpuready ... | head`, a pipe closed at once (`| true`), stdout or
stderr closed when gpuready starts (`>&-`). The results are written, and the exit code is the verdict's."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, ModuleTmp
from tests.unit.core.test_bad_inputs import make_inventory, with_settings
from tests.unit.core.test_scope import LOCAL

#: How the reader goes away, as a shell writes it after the command.
READERS = {
    "both streams into a pipe closed at once": "2>&1 | true",
    "both streams into head -1": "2>&1 | head -1 >/dev/null",
    "stderr into a pipe closed at once": "2>&1 >/dev/null | true",
    "stdout closed": ">&- 2>/dev/null",
    "stderr closed": "2>&- >/dev/null",
    "both closed": ">&- 2>&-",
}


def run_with(reader: str, *args: str) -> int:
    """The exit code of ``gpuready ARGS`` run by a shell with its output going to ``reader``."""
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "gpuready.core.cli", *args])
    # pipefail: the pipeline's code is gpuready's, not the reader's.
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} {reader}"], cwd=ROOT, timeout=600)
    return done.returncode


def passing_inventory(tmp_path: Path) -> Path:
    return make_inventory(
        tmp_path,
        hosts={"gpu_nodes": {"hosts": {"here": LOCAL}}},
        settings=with_settings(node_classes__v100__gpu_count=0),
    )


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_validate_writes_every_result_and_keeps_its_exit_code(tmp_path: Path, reader: str) -> None:
    inv = passing_inventory(tmp_path)
    runs = tmp_path / "runs"
    # One check that passes on any Linux machine, so the verdict is "passed" and exit 0.
    args = ["validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), "--only", "driver.nouveau_absent"]
    assert run_with(reader, *args) == 0
    [folder] = runs.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "passed"
    assert {c["id"] for c in summary["checks"]} >= {"driver.nouveau_absent"}
    assert (folder / "report.md").is_file() and (folder / "junit.xml").is_file()


@pytest.fixture(scope="module")
def passed_run(module_tmp: ModuleTmp) -> tuple[Path, Path]:
    """A passing run's folder, and its inventory."""
    tmp_path = module_tmp("passed")
    inv = passing_inventory(tmp_path)
    runs = tmp_path / "runs"
    args = ["validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), "--only", "driver.nouveau_absent"]
    assert run_with(">/dev/null 2>&1", *args) == 0
    [folder] = runs.iterdir()
    return folder, inv


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_report_show_and_inventory_check_keep_their_exit_code(passed_run: tuple[Path, Path], reader: str) -> None:
    folder, inv = passed_run
    assert run_with(reader, "report", "show", str(folder)) == 0
    assert run_with(reader, "report", "show", str(folder), "--json") == 0
    assert run_with(reader, "inventory", "check", "-i", str(inv)) == 0


def test_no_traceback_when_stdout_is_closed(tmp_path: Path) -> None:
    inv = passing_inventory(tmp_path)
    command = shlex.join([sys.executable, "-m", "gpuready.core.cli", "inventory", "check", "-i", str(inv)])
    done = subprocess.run(["bash", "-c", f"{command} >&-"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_provision_check_keeps_its_exit_code_when_the_reader_quits(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    local = ROOT / "inventories" / "local"
    args = ["provision", "cluster", "-i", str(local), "--check", "--tags", "preflight", "--artifacts", str(runs)]
    assert run_with("2>&1 | head -1 >/dev/null", *args) == 0
    [folder] = runs.iterdir()
    assert json.loads((folder / "summary.json").read_text())["status"] == "passed"


def test_a_descriptor_closed_at_start_never_receives_a_report(tmp_path: Path) -> None:
    """With stdout closed, the first file gpuready opens would be descriptor 1: the verdict printed after would
    be written into it. The descriptor is held by /dev/null instead, and the reports hold only themselves."""
    inv = passing_inventory(tmp_path)
    runs = tmp_path / "runs"
    args = ["validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), "--only", "driver.nouveau_absent"]
    assert run_with(">&- 2>&-", *args) == 0
    [folder] = runs.iterdir()
    json.loads((folder / "summary.json").read_text())
    assert "validate gpu-node:" not in (folder / "command.txt").read_text()
    assert os.path.getsize(folder / "report.md") > 0
