"""Real multi-process training on this machine's CPU: Horovod over Gloo and MultiWorkerMirroredStrategy.

Each run is driven through the CLI as a user would; the assertions read the workers' own results.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests import training_sizes as sizes
from tests.conftest import gpuready, require

pytestmark = [pytest.mark.train, pytest.mark.slow]

TINY = [*sizes.TINY, "--cpu"]


def _run_dir(artifacts: Path) -> Path:
    (run,) = list(artifacts.iterdir())
    return run


def _assert_trained_together(ranks: list[dict]) -> None:
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["size"] == 2 for r in ranks)
    assert all(len(r["step_times"]) == 3 for r in ranks)
    # each worker saw its own data (different first losses) ...
    assert ranks[0]["losses"][0] != ranks[1]["losses"][0]
    # ... yet every worker ends with the same, changed weights: the gradients were averaged
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]
    assert ranks[0]["weights_sha256"] != ranks[0]["weights_sha256_before"]


def test_horovod_gloo_sweep_1_and_2_workers(artifacts: Path) -> None:
    require(
        importlib.util.find_spec("tensorflow") and importlib.util.find_spec("horovod"),
        "TensorFlow and Horovod (make test installs the train extra)",
    )
    proc = gpuready("validate", "training", "--gpus", "1,2", *TINY, "--artifacts", str(artifacts))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _run_dir(artifacts)
    raw = json.loads((run / "step_times.json").read_text())
    assert sorted(raw) == ["1", "2"]
    _assert_trained_together(raw["2"])
    assert all(r["distribution"] == "horovod" for r in raw["2"])

    summary = json.loads((run / "summary.json").read_text())
    assert {c["id"]: c["status"] for c in summary["checks"]} == {
        "training.1w.trained": "passed",
        "training.2w.trained": "passed",
        # a CPU run is recorded, never judged as GPUs are
        "training.1w.images_per_second": "skipped",
        "training.2w.images_per_second": "skipped",
        "training.1w.per_gpu": "skipped",
        "training.2w.per_gpu": "skipped",
        "training.2w.scaling": "skipped",
    }
    # the report's figures are recomputable from the raw step times, by hand
    per_worker = {
        n: [r["batch_size"] * len(r["step_times"]) / sum(r["step_times"]) for r in ranks] for n, ranks in raw.items()
    }
    metrics = summary["metrics"]
    assert metrics["images_per_second_1w"] == pytest.approx(per_worker["1"][0], rel=1e-4)
    assert metrics["images_per_second_2w"] == pytest.approx(sum(per_worker["2"]), rel=1e-4)
    assert metrics["efficiency_2w"] == pytest.approx(sum(per_worker["2"]) / 2 / per_worker["1"][0], rel=1e-3)
    assert (run / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![scaling curve](scaling.png)" in (run / "training.md").read_text()
    assert "scaling on CPU, not GPUs (from the raw step times)" in proc.stdout
    assert "# Training scaling: CPU · resnet50" in (run / "training.md").read_text()
    assert all(r["device"].startswith("CPU") for r in raw["2"])


def test_multiworker_mirrored_two_workers(artifacts: Path) -> None:
    require(importlib.util.find_spec("tensorflow"), "TensorFlow (make test installs the train extra)")
    proc = gpuready(
        "validate", "training", "--gpus", "2", "--distribution", "mwms", *TINY, "--artifacts", str(artifacts)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    raw = json.loads((_run_dir(artifacts) / "step_times.json").read_text())
    _assert_trained_together(raw["2"])
    assert all(r["distribution"] == "mwms" for r in raw["2"])
