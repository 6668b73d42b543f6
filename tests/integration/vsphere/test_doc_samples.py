"""docs/vsphere.md's console samples are what the commands print on the vSphere lab: scripts/record-doc-samples
brings the lab up in an empty folder (`gpuready lab up --components vsphere`), re-runs every sample in order on
it, takes it down, and fails with a diff when one no longer matches."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.unit.core.test_doc_samples import check

pytestmark = pytest.mark.slow


def test_the_vsphere_samples_still_match_what_the_lab_prints() -> None:
    done = check(ROOT / "docs" / "vsphere.md", lab="vsphere")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lab: vsphere" in (ROOT / "docs" / "vsphere.md").read_text()
