"""Training judged per GPU: against the model's per-GPU reference, against its same-model mates, alone on
its GPU; scaling against its floor on GPUs only; and a CPU run never passes for a GPU one."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.core.errors import BadInput
from gpuready.core.results import RunResult
from gpuready.core.settings.training import TrainingReference
from gpuready.workloads.controller import references, sweep
from gpuready.workloads.controller.references import Conditions
from gpuready.workloads.gpu_sharing import gpu_matches, parse_compute_apps, parse_gpu_load
from gpuready.workloads.launchers import Launch, Plan
from gpuready.workloads.launchers.targets import Target
from tests.conftest import ROOT

APPS = ROOT / "tests" / "fixtures" / "gpu" / "compute-apps"
H100 = "NVIDIA H100 80GB HBM3"
#: the recorded H100's uuid, masked by its capture's author
ZERO = "GPU-00000000-0000-0000-0000-000000000000"
COMPILED = Plan(framework="pytorch", distribution="ddp", batch_size=256, image_size=224, mixed_precision=True)
EAGER = Plan(
    framework="pytorch", distribution="ddp", batch_size=256, image_size=224, mixed_precision=True, compile="off"
)


def _rank(rank: int, images_per_second: float, *, device: str = f"GPU {H100}", compiled: bool = True, **extra) -> dict:
    """One worker's result as torch_train prints it, with step times that give ``images_per_second``."""
    steps = 10
    return {
        "rank": rank,
        "host": "gpu-01",
        "gpu_index": rank,
        "device": device,
        "framework": "pytorch",
        "precision": "bf16",
        "compiled": compiled,
        "batch_size": 256,
        "step_times": [256 / images_per_second] * steps,
        "weights_sha256_before": "a",
        "weights_sha256": "b",
        **extra,
    }


def _target(**kw) -> Target:
    return Target("local", "localhost", H100, 8, **kw)


def _run(gpu_model: str = H100, compiled: bool = False, **kw) -> Conditions:
    base = {"gpu_model": gpu_model, "model": "densenet121", "batch_size": 256, "image_size": 224, "precision": "bf16"}
    return Conditions(**{**base, "compiled": compiled, **kw})


def test_per_gpu_references_are_gpureadys_own_runs_only() -> None:
    (_cond, ref) = references.find([], _run())
    assert (ref.target, ref.lower, ref.unit) == (1950.0, 1560.0, "images/s")
    assert ref.source.startswith("gpuready validate training --framework pytorch --gpus 1 --mixed-precision")
    # the compiled figure came from a hand-written loop, not gpuready's run: no reference for a compiled run
    assert references.find([], _run(compiled=True)) is None
    assert references.find([], _run(batch_size=64)) is None  # host-bound there: no reference
    assert references.find([], _run(precision="fp32")) is None
    assert references.find([], _run(gpu_model="NVIDIA H200")) is None
    # the inventory's row wins over gpuready's
    mine = [TrainingReference(gpu_model=H100, model="densenet121", metric=references.PER_GPU, target=5000.0)]
    assert references.find(mine, _run())[1].target == 5000.0
    # and a per-GPU row never judges a run's total
    assert references.find([], _run(metric=references.TOTAL, gpus=1)) is None


def test_every_reference_row_says_what_was_measured_and_by_which_run() -> None:
    for cond, ref in references.TABLE:
        assert cond.gpu_model != "*" and cond.model != "*" and cond.precision != "*"
        assert None not in (cond.batch_size, cond.image_size, cond.compiled)
        assert ref.source.startswith("gpuready validate training "), ref.source
        assert ref.unit == "images/s" and ref.lower < ref.target


def test_median_of_mates_names_exactly_the_slow_gpu() -> None:
    ranks = [_rank(i, 3700.0 + i, device="GPU NVIDIA H200") for i in range(8)]
    ranks[5] = _rank(5, 1850.0, device="GPU NVIDIA H200")  # half its mates
    check = sweep.gpu_check(8, ranks, COMPILED, _target())
    assert check.status == "failed"
    assert check.message == (
        "1 problem: worker 5 (gpu-01 GPU 5): 1850.0 images/s, below 85% of the median of its 7 same-model mates "
        "(3703.0)"
    )
    # two GPUs are enough; another model is no mate; 81% of the mates' median passes
    assert sweep.gpu_check(2, ranks[4:6], COMPILED, _target()).status == "failed"
    other = [_rank(0, 1000.0, device="GPU NVIDIA A100-SXM4-80GB"), ranks[0]]
    assert sweep.gpu_check(2, other, COMPILED, _target()).status == "skipped"
    pair = [_rank(0, 870.0, device="GPU NVIDIA H200"), _rank(1, 1000.0, device="GPU NVIDIA H200")]
    passing = sweep.gpu_check(2, pair, COMPILED, _target())
    assert passing.status == "passed", passing.message
    assert passing.message == (
        "2 GPUs (NVIDIA H200): 870.0-1000.0 images/s each, every GPU alone on it and at least 85% of its mates' median"
    )


def test_busy_gpus_are_left_out_of_their_mates_median() -> None:
    gpu = "GPU NVIDIA H200"
    neighbour = parse_compute_apps((APPS / "h100-80gb-hbm3-590.48.01-load.csv").read_text())[2:]
    ranks = [
        _rank(0, 1000.0, device=gpu),
        _rank(1, 400.0, device=gpu, gpu_other_processes=neighbour),
        _rank(2, 400.0, device=gpu, gpu_other_processes=neighbour),
        _rank(3, 700.0, device=gpu),
    ]
    check = sweep.gpu_check(4, ranks, COMPILED, _target())
    assert check.status == "failed"
    # with the busy two counted, worker 3's mates' median would be 400 and it would pass: they are left out
    assert "worker 3 (gpu-01 GPU 3): 700.0 images/s, below 85% of the median of its 1 same-model mate (1000.0)" in (
        check.evidence
    )
    assert check.message.startswith("3 problems: worker 1 (gpu-01 GPU 1): its GPU is busy with another process")


def test_a_gpu_at_half_speed_fails_against_its_reference_alone() -> None:
    check = sweep.gpu_check(1, [_rank(0, 975.0, compiled=False)], EAGER, _target())
    assert check.status == "failed"
    assert check.message == (
        f"1 problem: worker 0 (gpu-01 GPU 0): 975.0 images/s, below 1560.0 (reference 1950 images/s for {H100})"
    )
    healthy = sweep.gpu_check(1, [_rank(0, 1940.0, compiled=False)], EAGER, _target())
    assert healthy.status == "passed"
    assert healthy.message == (
        f"1 GPU ({H100}): 1940.0 images/s each, every GPU alone on it and at least its per-GPU reference"
    )
    assert "gpuready validate training" in healthy.evidence


def test_a_slow_gpu_among_mates_fails_by_name_without_any_reference() -> None:
    gpu = "GPU NVIDIA L40S"  # no per-GPU row for it
    ranks = [_rank(i, 1200.0 + i, device=gpu) for i in range(8)]
    ranks[3] = _rank(3, 600.0, device=gpu)
    check = sweep.gpu_check(8, ranks, COMPILED, _target())
    assert check.status == "failed"
    assert check.message == (
        "1 problem: worker 3 (gpu-01 GPU 3): 600.0 images/s, below 85% of the median of its 7 same-model mates (1204.0)"
    )


def test_a_lone_gpu_without_a_gpuready_reference_is_recorded_not_judged() -> None:
    for device, compiled in (("GPU NVIDIA L40S", True), (f"GPU {H100}", True)):
        check = sweep.gpu_check(1, [_rank(0, 1200.0, device=device, compiled=compiled)], COMPILED, _target())
        assert check.status == "skipped", check.message
        assert check.message == (
            f"1 GPU ({device[4:]}): 1200.0 images/s each recorded, not judged: no reference measured by gpuready for "
            "densenet121 bf16 batch 256 at 224 px (compiled), and no same-model mates"
        )


def test_a_busy_gpu_is_never_passed_and_names_the_other_process() -> None:
    others = parse_compute_apps((APPS / "h100-80gb-hbm3-590.48.01-load.csv").read_text())
    check = sweep.gpu_check(1, [_rank(0, 3650.0, gpu_other_processes=others[2:])], COMPILED, _target())
    assert check.status == "failed"
    assert "worker 0 (gpu-01 GPU 0): its GPU is busy with another process, pid 11345 (./gpu_burn, 15690 MiB)" in (
        check.message
    )


def test_a_gpu_busy_before_the_run_fails_where_its_processes_cannot_be_seen() -> None:
    # a pod in its own PID namespace: nvidia-smi names no process, but the GPU's load before the worker's context
    # (the real H100 under gpu-burn) shows the neighbour
    load = parse_gpu_load((APPS / "h100-80gb-hbm3-590.48.01-query-gpu-load.csv").read_text())
    check = sweep.gpu_check(1, [_rank(0, 1940.0, compiled=False, gpu_load_before=load[ZERO])], EAGER, _target())
    assert check.status == "failed"
    assert check.message == (
        "1 problem: worker 0 (gpu-01 GPU 0): its GPU was busy before the worker opened its context (19818 MiB held "
        "by other contexts, 100% kernel time), by a process nvidia-smi does not show here"
    )
    idle = parse_gpu_load((APPS / "h100-80gb-hbm3-590.48.01-query-gpu-idle.csv").read_text())
    assert idle[ZERO] == {"memory_used_mib": 0, "utilization_gpu_pct": 0}
    alone = sweep.gpu_check(1, [_rank(0, 1940.0, compiled=False, gpu_load_before=idle[ZERO])], EAGER, _target())
    assert alone.status == "passed", alone.message


def test_the_total_is_judged_only_against_a_reference_and_never_on_the_cpu() -> None:
    ranks = [_rank(i, 1000.0) for i in range(4)]
    mine = (TrainingReference(gpu_model=H100, model="densenet121", gpus=4, target=4000.0, lower=-0.05, upper=0.1),)
    target = _target(references=mine)
    within = sweep.images_check(4, 3900.0, ranks, COMPILED, target, cpu=False)
    assert within.status == "passed" and within.message == (
        f"3900.0 images/s vs reference 4000 images/s ({H100}, 4 GPUs): within [3800.0, 4400.0] images/s"
    )
    assert sweep.images_check(4, 3700.0, ranks, COMPILED, target, cpu=False).status == "failed"
    assert sweep.images_check(4, 4500.0, ranks, COMPILED, target, cpu=False).status == "failed"  # above the upper
    recorded = sweep.images_check(2, 1900.0, ranks[:2], COMPILED, target, cpu=False)
    assert (recorded.status, recorded.message) == ("skipped", "1900.0 images/s recorded, not judged (no reference)")
    cpu = sweep.images_check(4, 3900.0, ranks, COMPILED, target, cpu=True)
    assert cpu.status == "skipped" and "recorded, not judged" in cpu.message


def test_compute_apps_of_a_real_h100_under_load_and_idle() -> None:
    busy = parse_compute_apps((APPS / "h100-80gb-hbm3-590.48.01-load.csv").read_text())
    assert [(p["pid"], p["name"], p["used_memory_mib"]) for p in busy] == [
        (11327, "/root/tools/memhog", 2566),
        (11328, "/root/tools/memhog", 1542),
        (11345, "./gpu_burn", 15690),
    ]
    assert parse_compute_apps((APPS / "h100-80gb-hbm3-590.48.01-idle.csv").read_text()) == []
    # torch gives the bare uuid, nvidia-smi prefixes GPU-; without torch's uuid nothing is claimed
    assert gpu_matches(busy[0]["gpu_uuid"], "00000000-0000-0000-0000-000000000000")
    assert not gpu_matches(busy[0]["gpu_uuid"], "11111111-0000-0000-0000-000000000000")
    assert not gpu_matches(busy[0]["gpu_uuid"], "")
    assert parse_compute_apps("") == [] and parse_compute_apps("No devices were found\n") == []


def test_scaling_below_the_floor_fails_on_gpus_and_is_not_judged_on_cpu() -> None:
    row = {"workers": 4, "efficiency": 0.85, "images_per_second_per_worker": 850.0}
    failing = sweep.scaling_check(4, row, 1000.0, False, _target())
    assert failing.status == "failed" and failing.message == (
        "weak-scaling efficiency 85.0% at 4 workers, below the floor of 90%"
    )
    assert sweep.scaling_check(4, row, 1000.0, False, _target(scaling_floor=0.8)).status == "passed"
    cpu = sweep.scaling_check(4, {**row, "efficiency": 0.338}, 1000.0, True, _target())
    assert cpu.status == "skipped" and cpu.message.startswith("CPU run: weak-scaling efficiency 33.8%")


def test_gpus_that_are_not_there_are_refused_unless_cpu_is_asked_for() -> None:
    nothing = Target("local", "localhost", "", 0, found_by="no nvidia-smi on this machine")
    with pytest.raises(BadInput) as refused:
        sweep.check_plan(Plan(), [1], nothing)
    assert str(refused.value) == (
        "--gpus 1 on localhost, which has 0 GPUs (no nvidia-smi on this machine): one worker per GPU; run it on a "
        "GPU node, use --launcher ssh/slurm for more, or --cpu to train on the CPU on purpose"
    )
    sweep.check_plan(Plan(cpu=True), [1], nothing)
    with pytest.raises(BadInput, match=r"which has 1 GPUs .*give --gpus of at most 1"):
        sweep.check_plan(Plan(), [1, 2], Target("local", "localhost", H100, 1, found_by="nvidia-smi lists 1"))
    with pytest.raises(BadInput, match="whose node class has no GPUs"):
        sweep.check_plan(Plan(), [2], Target("slurm", "c-01", "", 0, found_by="node class cpu"))
    sweep.check_plan(Plan(), [16], Target("slurm", "c-01 (+3)", H100, 4))  # remote: the hosts decide


def test_a_worker_that_trained_on_the_cpu_fails_a_gpu_run(tmp_path: Path) -> None:
    cpu = _rank(0, 10.0, device="CPU (2 threads)")
    launch = Launch(1, results=[cpu], log=tmp_path / "workers-1.log")
    plan = Plan(steps=10)
    check = sweep.trained_check(launch, plan, "localhost")
    assert check.status == "failed" and check.message == "workers [0] trained on the CPU, not a GPU"
    assert sweep.trained_check(launch, Plan(steps=10, cpu=True), "localhost").status == "passed"


def test_worker_arguments_carry_compile_and_cpu() -> None:
    from gpuready.workloads import worker
    from gpuready.workloads.pytorch import train as torch_train
    from gpuready.workloads.smoke_run import compile_mode
    from gpuready.workloads.tensorflow import train

    assert "--compile" not in Plan().train_args() and "--cpu" not in Plan().train_args()
    args = Plan(compile="off", cpu=True, framework="pytorch").train_args()
    parsed = torch_train.parse_args(args)
    assert (parsed.compile, parsed.cpu) == ("off", True)
    assert train.parse_args(["--xla"]).compile == "on"  # the old flag still means XLA
    assert [compile_mode(e, x) for e, x in ((False, None), (True, None), (False, True), (False, False))] == [
        "auto",
        "off",
        "on",
        "off",
    ]
    assert worker.compiles("auto", True) and not worker.compiles("auto", False) and worker.compiles("on", False)
    assert worker.compile_seconds([12.5, 0.2], [0.1, 0.1, 0.3]) == 12.4
    assert worker.compile_seconds([], [0.1]) == 0.0


def test_timed_steps_time_every_step_but_the_warm_up_and_run_the_first_step_hook_once_outside_its_time() -> None:
    import argparse

    from gpuready.workloads import worker

    losses, hooked = iter([0.9, 0.8, 0.7, 0.6]), []
    args = argparse.Namespace(warmup_steps=0, steps=3, progress_seconds=0, batch_size=2)
    timing = worker.timed_steps(args, 0, 1, lambda: next(losses), after_first=lambda: hooked.append(len(hooked)))
    # --warmup-steps 0 still leaves the first step out of the timed ones: it compiles
    assert (timing.warmup, len(timing.warmup_times), len(timing.step_times)) == (1, 1, 3)
    assert timing.losses == [0.9, 0.8, 0.7, 0.6] and hooked == [0]
    record = timing.record()
    assert record["warmup_steps"] == 1 and record["losses"] == timing.losses
    assert record["first_step_unix"] >= record["process_start_unix"]


def test_the_docs_table_is_the_per_gpu_reference_table() -> None:
    text = (ROOT / "docs" / "training.md").read_text()
    for cond, ref in references.TABLE:
        row = (
            f"| {cond.gpu_model} | {cond.model} | {cond.batch_size} | {cond.image_size} px | {cond.precision} | "
            f"{'compiled' if cond.compiled else 'eager'} | {ref.target:g} |"
        )
        assert row in text, row
    assert "3703" not in text.split("### Per-GPU references")[1].split("###")[0]


def test_this_machines_gpus_are_asked_as_the_node_checks_ask() -> None:
    # the nodes lab's replayed nvidia-smi answers the node checks' query: the training's count must use it
    from gpuready.validate.node.node import QUERY_COMMAND
    from gpuready.workloads.launchers.targets import GPU_QUERY

    assert " ".join(["nvidia-smi", *GPU_QUERY]) == QUERY_COMMAND


def test_this_machines_gpus_come_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuready.lab import replay
    from gpuready.workloads.launchers.targets import local_gpus

    monkeypatch.setenv("PATH", f"{replay.build('h100-x8', tmp_path / 'replay')}:/usr/bin:/bin")
    assert local_gpus() == ([H100] * 8, "nvidia-smi lists 8")
    monkeypatch.setenv("PATH", f"{replay.build('nouveau', tmp_path / 'nouveau')}:/usr/bin:/bin")
    names, found_by = local_gpus()
    assert names == [] and found_by.startswith("nvidia-smi failed: ")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert local_gpus() == ([], "no nvidia-smi on this machine")


def test_a_workers_own_refusal_is_the_reason_not_its_launchers_traceback(tmp_path: Path) -> None:
    log = tmp_path / "workers-1.log"
    log.write_text(  # the head and tail of a real torchrun log from a worker that found no GPU (this tree's tests)
        "gpuready pytorch worker: no GPU visible to this worker (torch 2.15.0+cu132, CUDA build 13.2, no CUDA "
        "device): train where the GPUs are, or pass --cpu to train on the CPU on purpose\n"
        "E1127 08:36:10.038000 14660 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2) "
        "local_rank: 0 (pid: 14986) of binary: /work/.venv/bin/python3.11\n"
        "Traceback (most recent call last):\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "============================================================\n"
    )
    launch = Launch(1, log=log, returncode=1).collect()
    assert launch.problem == (
        "exit 1, 0/1 workers reported: gpuready pytorch worker: no GPU visible to this worker (torch 2.15.0+cu132, "
        "CUDA build 13.2, no CUDA device): train where the GPUs are, or pass --cpu to train on the CPU on purpose"
    )


def _sweep_on_h200s(results: dict[int, list[dict]], folder: Path, result: RunResult) -> list[dict]:
    """sweep.run of a compiled bf16 PyTorch plan over the worker counts ``results`` has, on one host with as
    many H200s, each launch answering with the workers' results given for its count."""
    return sweep.run(
        Plan(framework="pytorch", batch_size=256, image_size=224, mixed_precision=True, steps=10),
        sorted(results),
        Target("local", "localhost", "NVIDIA H200", max(results)),
        folder,
        result,
        lambda _plan, n, _folder: Launch(n, results=results[n]),
        lambda _line: None,
    )


def test_a_sweep_on_a_gpu_without_a_gpuready_reference_records_one_gpu_and_judges_two_by_their_mates(
    tmp_path: Path,
) -> None:
    """sweep.run end to end, from the workers' results to the checks: an H200 (no gpuready figure yet) at
    half speed beside a healthy mate. Alone, its figure is recorded, not judged (never "passed"); with a mate,
    it fails by name."""
    gpu = "GPU NVIDIA H200"
    results = {
        1: [_rank(0, 900.0, device=gpu)],
        2: [_rank(0, 1900.0, device=gpu), _rank(1, 900.0, device=gpu)],
    }
    result = RunResult(command="validate training")
    rows = _sweep_on_h200s(results, tmp_path, result)
    statuses = {c.id: (c.status, c.message) for c in result.checks}
    assert [r["workers"] for r in rows] == [1, 2]
    assert statuses["training.1w.trained"][0] == statuses["training.2w.trained"][0] == "passed"
    assert statuses["training.1w.images_per_second"] == (
        "skipped",
        "900.0 images/s recorded, not judged (no reference)",
    )
    assert statuses["training.1w.per_gpu"][0] == "skipped"
    assert "recorded, not judged: no reference measured by gpuready" in statuses["training.1w.per_gpu"][1]
    assert statuses["training.2w.per_gpu"] == (
        "failed",
        "1 problem: worker 1 (gpu-01 GPU 1): 900.0 images/s, below 85% of the median of its 1 same-model mate (1900.0)",
    )
    assert result.metrics["training"]["gpu_model"] == "NVIDIA H200"
    assert result.exit_code() == 1


def test_a_figure_without_a_reference_never_passes_the_auroc_included(tmp_path: Path) -> None:
    """sweep.run with real data's AUROC on rank 0: no reference judges a smoke run's AUROC, so it is recorded,
    not judged, as the images/s without a reference are; the only check that passes is what was proven."""
    gpu = "GPU NVIDIA H200"
    results = {1: [_rank(0, 900.0, device=gpu, auroc=[0.5, 0.6, None, 0.7])]}
    result = RunResult(command="validate training")
    _sweep_on_h200s(results, tmp_path, result)
    statuses = {c.id: (c.status, c.message) for c in result.checks}
    assert statuses["training.1w.auroc"] == (
        "skipped",
        "mean AUROC 0.600 over 3 labels recorded, not judged (no reference for a smoke run; the CheXNet paper's "
        "0.841 is after full training)",
    )
    assert [i for i, (status, _) in statuses.items() if status == "passed"] == ["training.1w.trained"]
