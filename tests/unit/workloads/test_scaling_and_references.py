"""The figures come from the raw step times only, and references judge them ReFrame-style."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuready.core.settings.training import Training, TrainingReference
from gpuready.workloads import smoke_run
from gpuready.workloads.controller import references, scaling
from gpuready.workloads.controller.references import Conditions
from gpuready.workloads.launchers import Plan


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


def test_no_shipped_reference_for_a_runs_total_only_the_inventorys() -> None:
    # the vSphere study's tf_cnn_benchmarks figures were measured by another program: gpuready ships no total
    total = Conditions("NVIDIA A100-PCIE-40GB", "resnet50", references.TOTAL, gpus=4, batch_size=1024, image_size=224)
    assert references.find([], replace(total, precision="fp32", compiled=False)) is None
    mine = [TrainingReference(gpu_model="NVIDIA A100-PCIE-40GB", gpus=4, target=10675.09, lower=-0.05)]
    (_cond, ref) = references.find(mine, replace(total, precision="fp32", compiled=False))
    assert (ref.target, ref.lower, ref.upper, ref.source) == (
        10675.09,
        pytest.approx(10141.3355),
        None,
        "the inventory's training.references",
    )
    assert ref.admits(10500.0) and not ref.admits(9000.0)


def test_inventory_reference_exact_beats_wildcard_and_keeps_its_upper_bound() -> None:
    mine = [
        TrainingReference(gpus=1, target=100.0),
        TrainingReference(gpu_model="Tesla T4", gpus=1, target=50.0, upper=0.1),
    ]
    run = Conditions("Tesla T4", "resnet50", references.TOTAL, 1, 32, 224, "fp32", False)
    assert references.find(mine, run)[1].target == 50.0
    assert references.find(mine, replace(run, gpu_model="Other"))[1].target == 100.0
    assert not references.find(mine, run)[1].admits(56.0)  # above the upper bound
    assert references.find(mine, replace(run, gpus=2)) is None


def test_an_inventory_row_keeps_every_condition_it_names() -> None:
    row = TrainingReference(
        gpu_model="NVIDIA H200",
        model="resnet50",
        gpus=8,
        metric=references.TOTAL,
        batch_size=64,
        image_size=256,
        precision="bf16",
        compiled=True,
        target=1000.0,
        lower=-0.2,
    )
    conditions, ref = references.from_settings(row)
    assert conditions == Conditions("NVIDIA H200", "resnet50", references.TOTAL, 8, 64, 256, "bf16", True)
    assert (ref.target, ref.lower) == (1000.0, 800.0)


def test_the_workers_plan_carries_every_training_setting() -> None:
    # Values other than the defaults, under the names the settings and the plan share.
    shared: dict[str, Any] = {
        "model": "resnet50",
        "batch_size": 16,
        "image_size": 128,
        "steps": 7,
        "warmup_steps": 2,
        "data": "/data/chexnet",
        "pipeline": "old",
        "distribution": "mwms",
        "mixed_precision": True,
        "eval_batches": 3,
        "timeout_s": 99,
        "framework": "pytorch",
        "cpu_threads": 4,
        "progress_s": 5,
    }
    assert all(getattr(Plan(), name) != value for name, value in shared.items())
    plan = smoke_run.plan_for(Training(**shared, eager=True), cpu=True)
    assert plan == Plan(**shared, compile="off", cpu=True)
