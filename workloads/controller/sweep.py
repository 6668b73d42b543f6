"""Run a sweep of worker counts with one launcher and turn it into checks, metrics and the report.

Per size: ``trained`` (every worker trained, on a GPU, to the same weights), ``images_per_second`` (the total
against its reference), ``per_gpu`` (each GPU alone on it, against its reference and its mates), ``scaling``
and ``auroc``; each a named check below, judged through :class:`gpuready.core.verdict.Verdict`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput
from gpuready.core.perf import MATES_FRACTION, below_mates
from gpuready.core.results import Check, RunResult
from gpuready.core.verdict import Verdict
from gpuready.workloads.controller import progress, references, report, scaling
from gpuready.workloads.controller.references import Conditions
from gpuready.workloads.launchers import Launch, Plan
from gpuready.workloads.launchers.targets import Target

log = logging.getLogger(__name__)

#: CheXNet paper (Rajpurkar et al. 2017): mean AUROC over the 14 pathologies.
CHEXNET_MEAN_AUROC = 0.841
SLOW_REMEDY = (
    "another process on a GPU: stop it (nvidia-smi lists it); a GPU slower than its reference or its mates: "
    "check its clocks, power and PCIe link (gpuready validate gpu-node)"
)
TOTAL_REMEDY = (
    "profile the GPUs for idle time and check the input pipeline, binding (mpirun --map-by socket) and interconnect"
)


def check_plan(plan: Plan, sizes: list[int], target: Target) -> None:
    if not sizes or any(n < 1 for n in sizes):
        raise BadInput(f"--gpus wants worker counts of 1 or more, got {sizes}")
    if plan.data != "synthetic" and not Path(plan.data).is_dir() and target.launcher == "local":
        raise BadInput(f"--data {plan.data}: no such folder (use 'synthetic' or TFRecords from the converter)")
    if not plan.cpu:
        _check_gpus(max(sizes), target)
        return
    cores = os.cpu_count() or 1
    if target.launcher == "local" and max(sizes) > cores:
        raise BadInput(
            f"--gpus {max(sizes)} on {target.where}, which has no GPU and {cores} CPU cores: at most one "
            "worker per core on CPU"
        )


def _check_gpus(most: int, target: Target) -> None:
    """A GPU run needs its GPUs: on this machine as many as the largest size, elsewhere a node class with GPUs."""
    found = f" ({target.found_by})" if target.found_by else ""
    cpu = "or --cpu to train on the CPU on purpose"
    if target.launcher == "local" and most > target.gpus_per_host:
        fix = f"give --gpus of at most {target.gpus_per_host}" if target.gpus_per_host else "run it on a GPU node"
        raise BadInput(
            f"--gpus {most} on {target.where}, which has {target.gpus_per_host} GPUs{found}: one worker per GPU; "
            f"{fix}, use --launcher ssh/slurm for more, {cpu}"
        )
    if target.launcher in ("ssh", "slurm", "kubernetes") and not target.gpus_per_host:
        raise BadInput(f"--gpus {most} on {target.where}, whose node class has no GPUs{found}: {cpu}")


def trained_check(launch: Launch, plan: Plan, where: str) -> Check:
    n = launch.workers
    verdict = Verdict(f"training.{n}w.trained", where)
    evidence = f"log: {launch.log}" if launch.log else ""
    if launch.problem:
        return verdict.failed(
            f"{n}-worker run failed: {launch.problem}",
            evidence,
            "read the log; check that every host can run `python -m gpuready.workloads.tensorflow.train --help`",
        )
    short = [r["rank"] for r in launch.results if len(r["step_times"]) != plan.steps]
    if short:
        return verdict.failed(f"workers {short} timed fewer than {plan.steps} steps", evidence)
    on_cpu = [r["rank"] for r in launch.results if is_cpu(r)]
    if on_cpu and not plan.cpu:
        return verdict.failed(
            f"workers {on_cpu} trained on the CPU, not a GPU",
            evidence,
            "check the framework's CUDA build and the GPUs each host sees; --cpu to train on the CPU on purpose",
        )
    unchanged = [r["rank"] for r in launch.results if r["weights_sha256"] == r["weights_sha256_before"]]
    if unchanged:
        return verdict.failed(f"workers {unchanged} did not change their weights", evidence)
    digests = {r["weights_sha256"] for r in launch.results}
    if len(digests) > 1:
        return verdict.failed(
            f"workers ended with {len(digests)} different weights: gradients were not averaged",
            evidence,
            "check the Horovod/NCCL/Gloo set-up: every worker must join one allreduce",
        )
    devices = sorted({f"{r['host']}: {r['device']}" for r in launch.results})
    same = "; identical weights on all workers (gradients averaged)" if n > 1 else ""
    return verdict.passed(
        f"{n} worker{'s' if n > 1 else ''} trained {plan.steps} steps{same}",
        "; ".join(devices) + (f"; {evidence}" if evidence else ""),
    )


def size_done(n: int, kind: str, check: Check, launch: Launch, seconds: float) -> str:
    """The line that ends a size: how long it took, and its images/s or why it failed."""
    head = f"training on {n} {kind}{'s' if n > 1 else ''}: "
    if check.status != "passed":
        return f"{head}{check.status} after {seconds:.0f}s ({check.message})"
    figures = scaling.size_figures(launch.results)
    return f"{head}done in {seconds:.0f}s, {figures['images_per_second']:.1f} images/s"


def is_cpu(rank: dict[str, Any]) -> bool:
    return str(rank.get("device", "")).startswith("CPU")


def gpu_model_of(rank: dict[str, Any], fallback: str) -> str:
    device = str(rank.get("device", ""))
    return device.removeprefix("GPU ").strip() if device.startswith("GPU") else fallback


def _precision(rank: dict[str, Any]) -> str:
    if rank.get("precision"):
        return str(rank["precision"])
    return ("bf16" if rank.get("framework") == "pytorch" else "fp16") if rank.get("mixed_precision") else "fp32"


def _compiled(rank: dict[str, Any]) -> bool:
    return bool(rank.get("compiled", rank.get("xla", False)))


def conditions(
    rank: dict[str, Any], plan: Plan, target: Target, metric: str = references.PER_GPU, gpus: int | None = None
) -> Conditions:
    """What this worker's figure was measured under, to find the reference measured the same way."""
    return Conditions(
        gpu_model=gpu_model_of(rank, target.gpu_model),
        model=plan.model,
        metric=metric,
        gpus=gpus,
        batch_size=plan.batch_size,
        image_size=plan.image_size,
        precision=_precision(rank),
        compiled=_compiled(rank),
    )


def _worker(rank: dict[str, Any]) -> str:
    gpu = f" GPU {rank['gpu_index']}" if rank.get("gpu_index") is not None else ""
    return f"worker {rank['rank']} ({rank.get('host', '?')}{gpu})"


def _listed(problems: list[str], most: int = 3) -> str:
    more = f"; +{len(problems) - most} more" if len(problems) > most else ""
    return "; ".join(problems[:most]) + more


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n > 1 else ''}"


def sharing(rank: dict[str, Any]) -> str:
    """What else used this worker's GPU, or empty: the processes it named, else the GPU's load before it opened
    its context (memory other contexts held, kernel time), which shows where its processes cannot be seen."""
    named = []
    for other in rank.get("gpu_other_processes") or []:
        details = [other["name"]]
        if other.get("used_memory_mib") is not None:
            details.append(f"{other['used_memory_mib']} MiB")
        if other.get("seen"):
            details.append(str(other["seen"]))
        named.append(f"pid {other['pid']} ({', '.join(details)})")
    if named:
        return f"its GPU is busy with another process, {'; '.join(named)}"
    load = rank.get("gpu_load_before") or {}
    memory, busy = load.get("memory_used_mib"), load.get("utilization_gpu_pct")
    if memory or busy:
        held = [f"{memory} MiB held by other contexts" if memory else "", f"{busy}% kernel time" if busy else ""]
        return (
            f"its GPU was busy before the worker opened its context ({', '.join(h for h in held if h)}), "
            "by a process nvidia-smi does not show here"
        )
    return ""


def _reference_problem(rank: dict[str, Any], value: float, row: references.Row | None) -> str:
    if row is None or row[1].admits(value):
        return ""
    (cond, ref) = row
    bound = f"below {ref.lower:.1f}" if value < ref.lower else f"above {ref.upper:.1f}"
    return f"{_worker(rank)}: {value:.1f} images/s, {bound} (reference {ref.target:g} images/s for {cond.gpu_model})"


def gpu_check(n: int, ranks: list[dict[str, Any]], plan: Plan, target: Target) -> Check:
    """Each GPU's images/s: alone on its GPU, at least its model's per-GPU reference, and at least
    :data:`~gpuready.core.perf.MATES_FRACTION` of the median of its same-model mates that are not busy (which
    catches a slow GPU where no reference exists). With neither a reference nor mates, recorded, not judged."""
    verdict = Verdict(f"training.{n}w.per_gpu", target.where, SLOW_REMEDY)
    values = {r["rank"]: scaling.worker_images_per_second(r) for r in ranks}
    models = {r["rank"]: gpu_model_of(r, target.gpu_model) for r in ranks}
    busy = {r["rank"]: sharing(r) for r in ranks}
    rows = {r["rank"]: references.find(target.references, conditions(r, plan, target)) for r in ranks}
    problems = [f"{_worker(r)}: {busy[r['rank']]}" for r in ranks if busy[r["rank"]]]
    mated = 0
    for r in ranks:
        me = r["rank"]
        if busy[me]:
            continue
        problems += [p for p in [_reference_problem(r, values[me], rows[me])] if p]
        mates = [values[m] for m in values if m != me and models[m] == models[me] and not busy[m]]
        mated += bool(mates)
        median = below_mates(values[me], mates)
        if median is not None:
            problems.append(
                f"{_worker(r)}: {values[me]:.1f} images/s, below {MATES_FRACTION:.0%} of the median of its "
                f"{_plural(len(mates), 'same-model mate')} ({median:.1f})"
            )
    sources = sorted({f"{row[1].target:g} images/s: {row[1].source}" for row in rows.values() if row})
    evidence = "; ".join(problems + [f"reference {s}" for s in sources])
    if problems:
        return verdict.failed(f"{_plural(len(problems), 'problem')}: {_listed(problems)}", evidence)
    span = f"{min(values.values()):.1f}" + (f"-{max(values.values()):.1f}" if len(values) > 1 else "")
    head = f"{_plural(n, 'GPU')} ({', '.join(sorted(set(models.values())))}): {span} images/s each"
    judged = (["at least its per-GPU reference"] if any(rows.values()) else []) + (
        [f"at least {MATES_FRACTION:.0%} of its mates' median"] if mated else []
    )
    if not judged:
        first = ranks[0]
        return verdict.skipped(
            f"{head} recorded, not judged: no reference measured by gpuready for {plan.model} "
            f"{_precision(first)} batch {plan.batch_size} at {plan.image_size} px "
            f"({'compiled' if _compiled(first) else 'eager'}), and no same-model mates",
            evidence,
        )
    return verdict.passed(f"{head}, every GPU alone on it and " + " and ".join(judged), evidence)


def images_check(n: int, value: float, ranks: list[dict[str, Any]], plan: Plan, target: Target, cpu: bool) -> Check:
    """The run's total images/s against its reference (the inventory's, for ``n`` workers); a CPU run's, or one
    without a reference, recorded, not judged."""
    verdict = Verdict(f"training.{n}w.images_per_second", target.where, TOTAL_REMEDY)
    if cpu:
        return verdict.skipped(f"CPU: {value:.1f} images/s recorded, not judged (a CPU run is never judged as GPUs)")
    row = references.find(target.references, conditions(ranks[0], plan, target, references.TOTAL, gpus=n))
    if row is None:
        return verdict.skipped(f"{value:.1f} images/s recorded, not judged (no reference)")
    cond, ref = row
    upper = "∞" if ref.upper is None else f"{ref.upper:.1f}"
    against = f"vs reference {ref.target:g} {ref.unit} ({cond.describe()})"
    bounds = f"[{ref.lower:.1f}, {upper}] {ref.unit}"
    return verdict.passed_if(
        ref.admits(value),
        f"{value:.1f} {ref.unit} {against}: within {bounds}",
        f"{value:.1f} {ref.unit} {against}: outside {bounds}",
        ref.source,
    )


def scaling_check(n: int, row: dict[str, Any], base: float, cpu: bool, target: Target) -> Check:
    verdict = Verdict(
        f"training.{n}w.scaling",
        target.where,
        "check the interconnect (gpuready validate cluster: NCCL all-reduce), the binding "
        "(mpirun --map-by socket) and the input pipeline",
    )
    eff, floor = row["efficiency"], target.scaling_floor
    figures = f"{row['images_per_second_per_worker']:.1f} images/s per worker against 1 worker's {base:.1f}"
    if cpu:
        return verdict.skipped(f"CPU run: weak-scaling efficiency {eff:.1%} recorded, not judged ({figures})")
    return verdict.passed_if(
        eff >= floor,
        f"weak-scaling efficiency {eff:.1%} (floor {floor:.0%})",
        f"weak-scaling efficiency {eff:.1%} at {n} workers, below the floor of {floor:.0%}",
        figures,
    )


def mean_auroc(ranks: list[dict[str, Any]]) -> float | None:
    auc = [a for a in ranks[0].get("auroc") or [] if a is not None]
    return sum(auc) / len(auc) if auc else None


def auroc_check(n: int, mean: float, labels: int, where: str) -> Check:
    # No reference: the paper's figure is after full training on ChestX-ray14, a smoke run trains a few steps.
    return Verdict(f"training.{n}w.auroc", where).skipped(
        f"mean AUROC {mean:.3f} over {labels} labels recorded, not judged "
        f"(no reference for a smoke run; the CheXNet paper's {CHEXNET_MEAN_AUROC} is after full training)"
    )


def launch_sizes(
    plan: Plan,
    sizes: list[int],
    target: Target,
    folder: Path,
    launch_size: Callable[[int], Launch],
    result: RunResult,
    note: Callable[[str], None],
) -> dict[int, list[dict[str, Any]]]:
    """Run each size in turn (``launch_size(workers)``, its logs in ``folder``, where its progress is read),
    each size's trained check added to ``result`` as it ends; the ranks of every size that trained."""
    runs: dict[int, list[dict[str, Any]]] = {}
    kind = "CPU worker" if plan.cpu else "GPU"
    for n in sizes:
        note(
            f"training {plan.model} on {_plural(n, kind)} ({target.launcher}, {plan.distribution}, "
            f"{plan.steps} steps of {plan.batch_size} images per worker)..."
        )
        started = time.monotonic()
        with progress.Relay(folder, n, _plural(n, kind), plan.progress_s, note):
            launched = launch_size(n)
        if launched.written_only:
            result.add(Verdict(f"training.{n}w.trained", target.where).skipped(launched.written_only))
            continue
        check = trained_check(launched, plan, target.where)
        result.add(check)
        note(size_done(n, kind, check, launched, time.monotonic() - started))
        if check.status == "passed":
            runs[n] = launched.results
    return runs


def judge_size(
    row: dict[str, Any], ranks: list[dict[str, Any]], base: float | None, plan: Plan, target: Target, cpu: bool
) -> list[Check]:
    """One size's checks after ``trained``; fills the row's compile and AUROC figures."""
    n = row["workers"]
    row["device"] = "CPU" if cpu else "GPU"
    row["compiled"] = all(_compiled(r) for r in ranks)
    if any("compile_s" in r for r in ranks):
        row["compile_s"] = max(float(r.get("compile_s") or 0) for r in ranks)
    checks = [images_check(n, row["images_per_second"], ranks, plan, target, cpu)]
    if cpu:
        checks.append(
            Verdict(f"training.{n}w.per_gpu", target.where).skipped(
                "CPU run: per-GPU references and the median-of-mates rule judge GPUs only"
            )
        )
    else:
        checks.append(gpu_check(n, ranks, plan, target))
    if n > 1 and base:
        checks.append(scaling_check(n, row, base, cpu, target))
    mean = mean_auroc(ranks)
    if mean is not None:
        labels = len([a for a in ranks[0]["auroc"] if a is not None])
        checks.append(auroc_check(n, mean, labels, target.where))
        row["mean_auroc"] = round(mean, 4)
    return checks


def setup_of(
    plan: Plan, target: Target, first: dict[str, Any], rows: list[dict[str, Any]], cpu: bool
) -> dict[str, Any]:
    """What the run was, for the report and the summary's metrics."""
    model = gpu_model_of(first, target.gpu_model)
    return {
        "device": "CPU (--cpu)" if cpu else f"GPU ({model or 'unknown model'})",
        "model": plan.model,
        "batch_size": plan.batch_size,
        "image_size": plan.image_size,
        "steps": plan.steps,
        "warmup_steps": plan.warmup_steps,
        "data": plan.data,
        "pipeline": plan.pipeline,
        "framework": plan.framework,
        "distribution": plan.distribution,
        "mixed_precision": plan.mixed_precision,
        "precision": _precision(first),
        "compile": plan.compile,
        "compiled": all(row["compiled"] for row in rows),
        "xla": bool(first.get("xla", False)),
        "launcher": target.launcher,
        "gpu_model": "none (CPU)" if cpu else (model or target.gpu_model),
        "where": target.where,
    }


def record_metrics(result: RunResult, rows: list[dict[str, Any]], setup: dict[str, Any]) -> None:
    result.metrics.update({"training": {**setup, "sizes": rows}})
    for row in rows:
        n = row["workers"]
        result.metrics[f"images_per_second_{n}w"] = row["images_per_second"]
        result.metrics[f"images_per_second_per_worker_{n}w"] = row["images_per_second_per_worker"]
        result.metrics[f"efficiency_{n}w"] = row["efficiency"]
        if "compile_s" in row:
            result.metrics[f"compile_s_{n}w"] = row["compile_s"]


def run(
    plan: Plan,
    sizes: list[int],
    target: Target,
    folder: Path,
    result: RunResult,
    launch: Callable[[Plan, int, Path], Launch],
    note: Callable[[str], None],
) -> list[dict[str, Any]]:
    check_plan(plan, sizes, target)
    runs = launch_sizes(plan, sizes, target, folder, lambda n: launch(plan, n, folder), result, note)
    if not runs:
        return []
    report.save_raw(folder, runs)
    rows = scaling.sweep_figures(runs)
    cpu = any(is_cpu(r) for ranks in runs.values() for r in ranks)
    base = next((r["images_per_second_per_worker"] for r in rows if r["workers"] == 1), None)
    for row in rows:
        for check in judge_size(row, runs[row["workers"]], base, plan, target, cpu):
            result.add(check)
    setup = setup_of(plan, target, next(iter(runs.values()))[0], rows, cpu)
    report.write(folder, rows, setup)
    record_metrics(result, rows, setup)
    return rows
