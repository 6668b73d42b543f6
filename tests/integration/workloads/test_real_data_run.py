"""One worker trains on converted ChestX-ray14-layout data through the new pipeline and reports AUROC."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require
from tests.unit.workloads.test_pipeline import make_nih

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_train_on_tfrecords_with_held_out_auroc(tmp_path: Path) -> None:
    require(
        importlib.util.find_spec("tensorflow") and importlib.util.find_spec("horovod"),
        "TensorFlow and Horovod (make test installs the train extra)",
    )
    from gpuready.workloads.dataset import convert

    make_nih(tmp_path / "nih", images=48)
    assert convert.convert(tmp_path / "nih", tmp_path / "records", size=36, shards=4) == {"train": 36, "test": 12}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuready.workloads.tensorflow.train",
            "--data",
            str(tmp_path / "records"),
            "--steps",
            "2",
            "--warmup-steps",
            "1",
            "--image-size",
            "32",
            "--batch-size",
            "4",
            "--eval-batches",
            "3",
            "--cpu",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "rank-0.json").read_text())
    assert result["data"] == str(tmp_path / "records") and result["pipeline"] == "new"
    assert len(result["step_times"]) == 2 and result["weights_sha256"] != result["weights_sha256_before"]
    auroc = result["auroc"]
    assert len(auroc) == 14
    scored = [a for a in auroc if a is not None]
    assert scored and all(0.0 <= a <= 1.0 for a in scored)
