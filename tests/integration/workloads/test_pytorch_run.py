"""The PyTorch path for real on this machine's CPU: DDP over Gloo under torchrun, 1 and 2 workers.

Driven through the CLI as a user would; the assertions read summary.json and the workers' own results.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from gpuready.workloads.dataset import tfrecord
from tests.conftest import gpuready, import_torch_stack, require
from tests.integration.workloads.conftest import PYTORCH_CPU, Sweep

pytestmark = pytest.mark.slow
TINY = PYTORCH_CPU
#: A progress line of a 2-worker CPU run on stderr.
PROGRESS = re.compile(r"  2 CPU workers: step (\d+)/(\d+)(, [\d.]+ images/s so far| \(warm-up, not timed\))")


def _need_torch() -> None:
    require(
        importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"),
        "torch and torchvision not installed (make .venv/.stamp-torch)",
    )
    import_torch_stack()


def _summary(artifacts: Path) -> tuple[Path, dict]:
    (run,) = list(artifacts.iterdir())
    return run, json.loads((run / "summary.json").read_text())


def test_ddp_sweep_of_1_and_2_cpu_workers_reports_figures(pytorch_cpu_sweep: Sweep) -> None:
    done = pytorch_cpu_sweep.done
    run, summary = _summary(pytorch_cpu_sweep.runs)
    assert done.returncode == 0, done.stdout + done.stderr
    training = summary["metrics"]["training"]
    assert training["framework"] == "pytorch" and training["distribution"] == "ddp"
    assert [row["workers"] for row in training["sizes"]] == [1, 2]
    assert all(row["images_per_second"] > 0 for row in training["sizes"])
    assert summary["metrics"]["efficiency_1w"] == 1.0 and summary["metrics"]["efficiency_2w"] > 0
    ranks = json.loads((run / "step_times.json").read_text())["2"]
    assert [r["rank"] for r in ranks] == [0, 1] and {r["backend"] for r in ranks} == {"gloo"}
    assert ranks[0]["losses"][0] != ranks[1]["losses"][0]  # each worker trained on its own data ...
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"] != ranks[0]["weights_sha256_before"]  # averaged
    # labelled CPU everywhere: the terminal, the report, the figures; never judged as GPUs
    assert training["device"] == "CPU (--cpu)" and training["gpu_model"] == "none (CPU)"
    assert "scaling on CPU, not GPUs" in done.stdout and "CPU workers" in done.stdout
    report = (run / "training.md").read_text()
    assert report.startswith("# Training scaling: CPU · densenet121") and "| workers (CPU processes) |" in report
    statuses = {c["id"]: c["status"] for c in summary["checks"]}
    assert statuses["training.1w.per_gpu"] == statuses["training.2w.scaling"] == "skipped"
    assert statuses["training.1w.images_per_second"] == statuses["training.2w.images_per_second"] == "skipped"
    # eager on the CPU unless asked: compiling DenseNet-121 there takes minutes
    assert {r["compiled"] for r in ranks} == {False} and training["compiled"] is False


def _shards(folder: Path, count: int, per_shard: int) -> None:
    import torch

    from gpuready.workloads.pytorch.data import png

    gen = torch.Generator().manual_seed(3)
    for s in range(count):
        records = []
        for i in range(per_shard):
            image = (torch.rand(1, 48, 48, generator=gen) * 255).to(torch.uint8)
            records.append(
                tfrecord.encode_example(
                    {"image": [png(image)], "labels": [(i + s) % 2] * 14, "name": [f"{s}-{i}.png".encode()]}
                )
            )
        tfrecord.write_records(folder / f"train-{s:05d}-of-{count:05d}.tfrecord", records)


def test_real_data_through_the_new_pipeline_on_2_workers(artifacts: Path, tmp_path: Path) -> None:
    _need_torch()
    data = tmp_path / "data"
    data.mkdir()
    _shards(data, 4, 8)
    done = gpuready(
        "validate",
        "training",
        "--gpus",
        "2",
        *TINY,
        "--data",
        str(data),
        "--pipeline",
        "new",
        "--artifacts",
        str(artifacts),
    )
    run, _ = _summary(artifacts)
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = json.loads((run / "step_times.json").read_text())["2"]
    assert {r["data"] for r in ranks} == {str(data)} and all(len(r["step_times"]) == 3 for r in ranks)
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]


def test_pytorch_refuses_tensorflow_only_options(artifacts: Path) -> None:
    done = gpuready("validate", "training", "--framework", "pytorch", "--xla", "--artifacts", str(artifacts))
    assert done.returncode == 2 and "--xla is for --framework tensorflow" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_gpu_node_whose_torch_sees_no_gpu_fails_and_never_trains_on_the_cpu(artifacts: Path, tmp_path: Path) -> None:
    """nvidia-smi lists 8 H100s (the nodes lab's replay), but this torch has no CUDA device: the worker stops in
    one line instead of training on the CPU, and the run fails."""
    _need_torch()
    from gpuready.lab import replay

    tools = replay.build("h100-x8", tmp_path / "replay")
    gpu_run = [a for a in TINY if a != "--cpu"]
    done = gpuready(
        "validate",
        "training",
        "--gpus",
        "1",
        *gpu_run,
        "--artifacts",
        str(artifacts),
        env={"PATH": f"{tools}:{os.environ['PATH']}"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    _, summary = _summary(artifacts)
    (check,) = summary["checks"]
    assert check["id"] == "training.1w.trained" and check["status"] == "failed"
    assert "gpuready pytorch worker: no GPU visible to this worker (torch " in check["message"]
    assert "pass --cpu to train on the CPU on purpose" in check["message"]


def test_a_run_says_how_far_it_is_on_stderr_a_line_per_period_from_rank_0_only(artifacts: Path) -> None:
    """Training is not silent: rank 0's step and images/s so far, relayed on stderr at most once per --progress
    seconds, each further than the last."""
    _need_torch()
    steps, period = 40, 0.5
    done = gpuready(
        "validate",
        "training",
        "--gpus",
        "2",
        *TINY,
        "--steps",
        str(steps),
        "--progress",
        str(period),
        "--artifacts",
        str(artifacts),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("  2 CPU workers: step ")]
    assert lines, done.stderr
    found = [PROGRESS.fullmatch(x) for x in lines]
    assert all(found), lines
    reached = [int(m.group(1)) for m in found if m]
    assert reached == sorted(set(reached)) and all(int(m.group(2)) == steps + 1 for m in found if m)
    assert any("images/s so far" in x for x in lines)
    # Bounded by the period: no more lines than periods in the run (the log's own timing of the steps).
    run, _ = _summary(artifacts)
    ranks = json.loads((run / "step_times.json").read_text())["2"]
    training_s = max(sum(r["step_times"]) + sum(r["warmup_step_times"]) for r in ranks)
    assert len(lines) <= training_s / period + 2, (len(lines), training_s)
    # The workers' log: one worker's lines, one per period at most, the last step's among them.
    log = (run / "workers-2.log").read_text()
    assert len(lines) <= log.count("GPUREADY_PROGRESS ") <= training_s / period + 2
    assert f'"step": {steps + 1}, "steps": {steps + 1}' in log
