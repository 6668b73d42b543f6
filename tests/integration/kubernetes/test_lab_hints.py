"""What `gpuready lab up --components kubernetes` prints to do next runs as printed: the admin's
kubeconfig for kubectl, all of site.yml against the lab, and `validate cluster`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.integration.kubernetes.conftest import require_go
from tests.lab_hints import run_hints

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def test_every_hint_lab_up_prints_runs_as_printed(tmp_path: Path) -> None:
    require_go()
    up = gpuready("lab", "up", "--components", "kubernetes", cwd=tmp_path, timeout=3600)
    try:
        assert up.returncode == 0, up.stderr
        ran = run_hints(up.stderr, tmp_path)
        assert [line.split(" -i ")[0] for line, _ in ran] == ["gpuready provision cluster", "gpuready validate cluster"]
        for line, done in ran:
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    finally:
        down = gpuready("lab", "down", cwd=tmp_path, timeout=300)
    assert down.returncode == 0, down.stderr
    [validated] = tmp_path.glob("gpuready-runs/*validate-cluster/summary.json")
    statuses = {c["status"] for c in json.loads(validated.read_text())["checks"]}
    assert "passed" in statuses and statuses <= {"passed", "skipped"}
