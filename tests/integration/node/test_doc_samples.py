"""docs/node-checks.md's console sample is what `validate gpu-node` prints on the nodes lab:
scripts/record-doc-samples brings the lab up in an empty folder (`gpuready lab up --components nodes`), re-runs
the sample on it, takes it down, and fails with a diff when it no longer matches."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, require
from tests.integration.node.conftest import can_make_namespaces
from tests.unit.core.test_doc_samples import check

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_the_node_checks_sample_still_matches_what_the_lab_prints() -> None:
    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    page = ROOT / "docs" / "node-checks.md"
    assert "lab: nodes" in page.read_text()
    done = check(page, lab="nodes")
    assert done.returncode == 0, done.stdout + done.stderr
