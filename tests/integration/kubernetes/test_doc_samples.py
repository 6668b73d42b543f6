"""docs/kubernetes-openshift.md's console samples are what the commands print on the Kubernetes lab: each sample
brings its own lab up and down (`gpuready lab up --components kubernetes` is one of its commands), and
scripts/record-doc-samples re-runs it in an empty folder and fails with a diff when it no longer matches."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.integration.kubernetes.conftest import require_go
from tests.unit.core.test_doc_samples import check

pytestmark = pytest.mark.slow


def test_the_kubernetes_samples_still_match_what_the_lab_prints() -> None:
    require_go()
    page = ROOT / "docs" / "kubernetes-openshift.md"
    assert "$ gpuready lab up --components kubernetes" in page.read_text()
    done = check(page, lab="kubernetes", timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
