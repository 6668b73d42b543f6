"""The figures come from the raw step times only, and references judge them ReFrame-style."""

from __future__ import annotations

import pytest

from gpuready.core.settings.training import Reference
from gpuready.workloads.controller import references, scaling


def _rank(rank: int, times: list[float], batch: int = 8) -> dict:
    return {"rank": rank, "batch_size": batch, "step_times": times}


def test_sweep_figures_from_step_times() -> None:
    rows = scaling.sweep_figures(
        {
            2: [_rank(0, [0.5, 0.5]), _rank(1, [1.0, 1.0])],  # 16 and 8 images/s
            1: [_rank(0, [0.25, 0.25])],  # 32 images/s
        }
    )
    assert [r["workers"] for r in rows] == [1, 2]
    assert rows[0]["images_per_second"] == 32.0
    assert rows[1]["images_per_second"] == 24.0
    assert rows[1]["images_per_second_per_worker"] == 12.0
    assert rows[1]["efficiency"] == pytest.approx(12 / 32)
    assert rows[1]["step_time_median_s"] == 0.75


def test_each_worker_keeps_its_own_images_per_second_rank_host_and_gpu() -> None:
    gpu = {**_rank(1, [1.0, 1.0]), "host": "gn02", "gpu_index": 3}  # 8 images/s
    cpu = {**_rank(0, [0.5, 0.5]), "host": "gn01", "gpu_index": None}  # 16 images/s
    (row,) = scaling.sweep_figures({2: [gpu, cpu]})
    assert row["ranks"] == [
        {"rank": 0, "host": "gn01", "images_per_second": 16.0},
        {"rank": 1, "host": "gn02", "gpu": 3, "images_per_second": 8.0},
    ]
    assert sum(r["images_per_second"] for r in row["ranks"]) == row["images_per_second"]


def test_no_efficiency_without_a_one_worker_run() -> None:
    (row,) = scaling.sweep_figures({4: [_rank(i, [1.0]) for i in range(4)]})
    assert row["efficiency"] is None and row["images_per_second"] == 32.0


def test_published_seed_003_figures_judge_a100_resnet50() -> None:
    ref = references.find([], gpu_model="NVIDIA A100-PCIE-40GB", model="resnet50", gpus=4)
    assert ref is not None and ref.target == 10675.09
    assert references.judge(10500.0, ref).ok is True  # within 5%
    assert references.judge(9000.0, ref).ok is False
    assert references.find([], gpu_model="NVIDIA A100-PCIE-40GB", model="densenet121", gpus=4) is None


def test_inventory_reference_beats_published_and_exact_beats_wildcard() -> None:
    mine = [Reference(gpus=1, target=100.0), Reference(gpu_model="Tesla T4", gpus=1, target=50.0, upper=0.1)]
    assert references.find(mine, gpu_model="Tesla T4", model="resnet50", gpus=1).target == 50.0
    assert references.find(mine, gpu_model="Other", model="resnet50", gpus=1).target == 100.0
    assert references.judge(56.0, mine[1]).ok is False  # above the upper bound


def test_metric_without_reference_is_recorded_not_failed() -> None:
    verdict = references.judge(12.5, None)
    assert verdict.ok is None and "recorded" in verdict.message
