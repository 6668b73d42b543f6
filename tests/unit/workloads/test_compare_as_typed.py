"""`report compare` as its --help shows it: the example runs as typed, and the terminal gets a table, not Markdown."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import ROOT, gpuready
from tests.doc_samples import owned_block


def _training_run(folder: Path, figures: dict[int, float]) -> None:
    folder.mkdir(parents=True)
    sizes = [{"workers": n, "images_per_second": v} for n, v in figures.items()]
    training = {"launcher": "slurm", "where": "c4140-01", "sizes": sizes}
    (folder / "summary.json").write_text(
        json.dumps({"command": "validate training", "metrics": {"training": training}})
    )


def test_the_help_example_works_as_typed(tmp_path: Path) -> None:
    help_text = gpuready("report", "compare", "--help").stdout
    [example] = [line.strip() for line in help_text.splitlines() if line.strip().startswith("gpuready report compare")]
    runs = tmp_path / "gpuready-runs"
    # Run numbers 3 and 7 in the default artifacts folder, as `validate training` names its folders.
    _training_run(runs / "0003-20261127T101500Z-validate-training", {1: 1000.0, 8: 7600.0})
    _training_run(runs / "0007-20261127T104500Z-validate-training", {1: 990.0, 8: 6992.0})
    # The docs' `report compare` sample is this run of the example.
    sample = owned_block(ROOT / "docs" / "training.md")
    assert sample.commands == [example]
    [done] = sample.run(tmp_path)
    assert done.returncode == 0, (example, done.stdout)
    lines = done.stdout.splitlines()
    [header] = [line for line in lines if "workers" in line and "bare-metal" in line]
    assert "kubernetes" in header
    [eight] = [line for line in lines if line.strip("│ ").startswith("8 ")]
    assert "7600.0" in eight and "6992.0 (+8.0%)" in eight
    # A table for a person: none of comparison.md's Markdown on the terminal.
    # Two runs compared, and no inventory read (a comparison reads run folders).
    assert "report compare: PASSED · 2 runs\ninventory: (none)\n" in done.stdout
    assert "|---" not in done.stdout and "# Comparison" not in done.stdout and "![" not in done.stdout
    comparison = next(runs.glob("*-report-compare"))
    assert "| 8 | 7600.0 | 6992.0 (+8.0%) |" in (comparison / "comparison.md").read_text()
    sample.assert_printed([done])


def test_a_run_number_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _training_run(runs / "0003-20261127T101500Z-validate-training", {1: 1000.0})
    done = gpuready("report", "compare", "3", "4=other", "--artifacts", str(runs), cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("gpuready: error: ") and len(done.stderr.strip().splitlines()) == 1
