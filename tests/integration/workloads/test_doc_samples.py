"""docs/training.md's console samples are what `validate training` prints: scripts/record-doc-samples re-runs
them (a refusal, and a real CPU run of two sizes) in an empty folder and fails with a diff when one no longer
matches; the run's measured figures are the only numbers it leaves out."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tests.conftest import ROOT, require
from tests.unit.core.test_doc_samples import check

pytestmark = pytest.mark.slow


def test_the_training_samples_still_match_what_validate_training_prints() -> None:
    require(
        importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"),
        "torch and torchvision not installed (make .venv/.stamp-torch)",
    )
    require(not shutil.which("nvidia-smi"), "the samples were recorded on a machine without GPUs")
    page = ROOT / "docs" / "training.md"
    assert "varies: figures" in page.read_text()
    done = check(page, lab="training", timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
