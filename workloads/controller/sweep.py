"""Run a sweep of worker counts with one launcher and turn it into checks, metrics and the report."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput
from gpuready.core.results import Check, RunResult, failed, passed, skipped
from gpuready.core.settings.training import Reference
from gpuready.workloads.controller import references, report, scaling
from gpuready.workloads.launchers import Launch, Plan

log = logging.getLogger(__name__)

#: CheXNet paper (Rajpurkar et al. 2017): mean AUROC over the 14 pathologies.
CHEXNET_MEAN_AUROC = 0.841


@dataclass(frozen=True)
class Target:
    """Where the workers run and what judges them."""

    launcher: str
    where: str  # the check's host column: "localhost", "c4140-01..c4140-02", a namespace
    gpu_model: str
    gpus_per_host: int
    references: tuple[Reference, ...] = ()
    #: how the GPU count was found: "nvidia-smi: 8 GPUs" on this machine, the node class for remote hosts
    found_by: str = ""
    #: on GPUs, a weak-scaling efficiency below this fails
    scaling_floor: float = 0.9


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
    cid, n = f"training.{launch.workers}w.trained", launch.workers
    evidence = f"log: {launch.log}" if launch.log else ""
    if launch.problem:
        return failed(
            cid,
            where,
            f"{n}-worker run failed: {launch.problem}",
            evidence,
            "read the log; check that every host can run `python -m gpuready.workloads.tensorflow.train --help`",
        )
    short = [r["rank"] for r in launch.results if len(r["step_times"]) != plan.steps]
    if short:
        return failed(cid, where, f"workers {short} timed fewer than {plan.steps} steps", evidence)
    on_cpu = [r["rank"] for r in launch.results if is_cpu(r)]
    if on_cpu and not plan.cpu:
        return failed(
            cid,
            where,
            f"workers {on_cpu} trained on the CPU, not a GPU",
            evidence,
            "check the framework's CUDA build and the GPUs each host sees; --cpu to train on the CPU on purpose",
        )
    unchanged = [r["rank"] for r in launch.results if r["weights_sha256"] == r["weights_sha256_before"]]
    if unchanged:
        return failed(cid, where, f"workers {unchanged} did not change their weights", evidence)
    digests = {r["weights_sha256"] for r in launch.results}
    if len(digests) > 1:
        return failed(
            cid,
            where,
            f"workers ended with {len(digests)} different weights: gradients were not averaged",
            evidence,
            "check the Horovod/NCCL/Gloo set-up: every worker must join one allreduce",
        )
    devices = sorted({f"{r['host']}: {r['device']}" for r in launch.results})
    same = "; identical weights on all workers (gradients averaged)" if n > 1 else ""
    return passed(
        cid,
        where,
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


def _worker(rank: dict[str, Any]) -> str:
    gpu = f" GPU {rank['gpu_index']}" if rank.get("gpu_index") is not None else ""
    return f"worker {rank['rank']} ({rank.get('host', '?')}{gpu})"


def _listed(problems: list[str], most: int = 3) -> str:
    more = f"; +{len(problems) - most} more" if len(problems) > most else ""
    return "; ".join(problems[:most]) + more


def gpu_check(n: int, ranks: list[dict[str, Any]], plan: Plan, target: Target) -> Check:
    """Each GPU's images/s: alone on its GPU, at least its model's per-GPU reference, and at least 80% of the
    median of its same-model mates (which catches a slow GPU where no reference exists)."""
    cid = f"training.{n}w.per_gpu"
    workers = [
        {
            "rank": r["rank"],
            "gpu_model": gpu_model_of(r, target.gpu_model),
            "value": scaling.worker_images_per_second(r),
        }
        for r in ranks
    ]
    by_rank = {r["rank"]: r for r in ranks}
    problems = []
    for r in ranks:
        for other in r.get("gpu_other_processes") or []:
            memory = f", {other['used_memory_mib']} MiB" if other.get("used_memory_mib") is not None else ""
            problems.append(
                f"{_worker(r)}: its GPU is busy with another process, pid {other['pid']} ({other['name']}{memory})"
            )
    refs: dict[str, Reference | None] = {}
    for w in workers:
        r = by_rank[w["rank"]]
        ref = references.find(
            target.references,
            gpu_model=w["gpu_model"],
            model=plan.model,
            metric=references.PER_GPU,
            batch_size=plan.batch_size,
            image_size=plan.image_size,
            precision=_precision(r),
            compiled=bool(r.get("compiled", r.get("xla", False))),
        )
        refs[w["gpu_model"]] = ref
        if ref is not None and w["value"] < references.lower_bound(ref):
            problems.append(
                f"{_worker(r)}: {w['value']:.1f} images/s, below {references.lower_bound(ref):.1f} "
                f"(reference {ref.target:g} {ref.lower:+.0%} for {w['gpu_model']})"
            )
    for slow in references.slow_mates(workers):
        problems.append(
            f"{_worker(by_rank[slow.rank])}: {slow.value:.1f} images/s, below {references.MATES_FLOOR:.0%} of the "
            f"median of its {slow.mates} same-model mate{'s' if slow.mates > 1 else ''} ({slow.mates_median:.1f})"
        )
    sources = sorted({f"{ref.target:g} images/s: {ref.source}" for ref in refs.values() if ref and ref.source})
    evidence = "; ".join(problems + [f"reference {s}" for s in sources])
    if problems:
        return failed(
            cid,
            target.where,
            f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: {_listed(problems)}",
            evidence,
            "another process on a GPU: stop it (nvidia-smi lists it); a GPU slower than its reference or its mates: "
            "check its clocks, power and PCIe link (gpuready validate gpu-node)",
        )
    models = sorted({w["gpu_model"] for w in workers})
    values = [w["value"] for w in workers]
    span = f"{min(values):.1f}" if len(values) == 1 else f"{min(values):.1f}-{max(values):.1f}"
    judged = []
    if any(refs.values()):
        judged.append("at least its per-GPU reference")
    if len(workers) > 1 and any(sum(w["gpu_model"] == m for w in workers) > 1 for m in models):
        judged.append(f"at least {references.MATES_FLOOR:.0%} of its mates' median")
    if not judged:
        precision = _precision(ranks[0])
        return passed(
            cid,
            target.where,
            f"{n} GPU{'s' if n > 1 else ''} ({', '.join(models)}): {span} images/s each recorded (no reference for "
            f"{plan.model} {precision} batch {plan.batch_size} at {plan.image_size} px, and no same-model mates)",
        )
    return passed(
        cid,
        target.where,
        f"{n} GPU{'s' if n > 1 else ''} ({', '.join(models)}): {span} images/s each, every GPU alone on it and "
        + " and ".join(judged),
        evidence,
    )


def scaling_check(n: int, row: dict[str, Any], base: float, cpu: bool, target: Target) -> Check:
    cid, eff = f"training.{n}w.scaling", row["efficiency"]
    figures = f"{row['images_per_second_per_worker']:.1f} images/s per worker against 1 worker's {base:.1f}"
    if cpu:
        return skipped(
            cid, target.where, f"CPU run: weak-scaling efficiency {eff:.1%} recorded, not judged ({figures})"
        )
    if eff < target.scaling_floor:
        return failed(
            cid,
            target.where,
            f"weak-scaling efficiency {eff:.1%} at {n} workers, below the floor of {target.scaling_floor:.0%}",
            figures,
            "check the interconnect (gpuready validate cluster: NCCL all-reduce), the binding "
            "(mpirun --map-by socket) and the input pipeline",
        )
    return passed(cid, target.where, f"weak-scaling efficiency {eff:.1%} (floor {target.scaling_floor:.0%})", figures)


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
    runs: dict[int, list[dict[str, Any]]] = {}
    kind = "CPU worker" if plan.cpu else "GPU"
    for n in sizes:
        note(
            f"training {plan.model} on {n} {kind}{'s' if n > 1 else ''} ({target.launcher}, {plan.distribution}, "
            f"{plan.steps} steps of {plan.batch_size} images per worker)..."
        )
        started = time.monotonic()
        launched = launch(plan, n, folder)
        if launched.written_only:
            result.add(skipped(f"training.{n}w.trained", target.where, launched.written_only))
            continue
        check = trained_check(launched, plan, target.where)
        result.add(check)
        note(size_done(n, kind, check, launched, time.monotonic() - started))
        if check.status == "passed":
            runs[n] = launched.results
    if not runs:
        return []
    report.save_raw(folder, runs)
    rows = scaling.sweep_figures(runs)
    cpu = any(is_cpu(r) for ranks in runs.values() for r in ranks)
    base = next((r["images_per_second_per_worker"] for r in rows if r["workers"] == 1), None)
    for row in rows:
        n = row["workers"]
        ranks = runs[n]
        row["device"] = "CPU" if cpu else "GPU"
        row["compiled"] = all(bool(r.get("compiled", r.get("xla", False))) for r in ranks)
        if any("compile_s" in r for r in ranks):
            row["compile_s"] = max(float(r.get("compile_s") or 0) for r in ranks)
        ref = references.find(target.references, gpu_model=target.gpu_model, model=plan.model, gpus=n)
        verdict = references.judge(row["images_per_second"], ref)
        message = f"CPU: {verdict.message}" if cpu else verdict.message
        cid = f"training.{n}w.images_per_second"
        if verdict.ok is False:
            result.add(
                failed(
                    cid,
                    target.where,
                    message,
                    remedy="profile the GPUs for idle time and check "
                    "the input pipeline, binding (mpirun --map-by socket) and interconnect",
                )
            )
        else:
            result.add(passed(cid, target.where, message))
        if cpu:
            result.add(
                skipped(
                    f"training.{n}w.per_gpu",
                    target.where,
                    "CPU run: per-GPU references and the median-of-mates rule judge GPUs only",
                )
            )
        else:
            result.add(gpu_check(n, ranks, plan, target))
        if n > 1 and base:
            result.add(scaling_check(n, row, base, cpu, target))
        auc = [a for a in runs[n][0].get("auroc") or [] if a is not None]
        if auc:
            mean = sum(auc) / len(auc)
            result.add(
                passed(
                    f"training.{n}w.auroc",
                    target.where,
                    f"mean AUROC {mean:.3f} over {len(auc)} labels recorded (CheXNet paper: {CHEXNET_MEAN_AUROC})",
                )
            )
            row["mean_auroc"] = round(mean, 4)
    first = next(iter(runs.values()))[0]
    setup = {
        "device": "CPU (--cpu)" if cpu else f"GPU ({gpu_model_of(first, target.gpu_model) or 'unknown model'})",
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
        "gpu_model": "none (CPU)" if cpu else (gpu_model_of(first, target.gpu_model) or target.gpu_model),
        "where": target.where,
    }
    report.write(folder, rows, setup)
    result.metrics.update({"training": {**setup, "sizes": rows}})
    for row in rows:
        n = row["workers"]
        result.metrics[f"images_per_second_{n}w"] = row["images_per_second"]
        result.metrics[f"images_per_second_per_worker_{n}w"] = row["images_per_second_per_worker"]
        result.metrics[f"efficiency_{n}w"] = row["efficiency"]
        if "compile_s" in row:
            result.metrics[f"compile_s_{n}w"] = row["compile_s"]
    return rows
