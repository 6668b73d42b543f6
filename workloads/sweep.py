"""Run a sweep of worker counts with one launcher and turn it into checks, metrics and the report."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput
from gpuready.core.results import Check, RunResult, failed, passed, skipped
from gpuready.core.settings.training import Reference
from gpuready.workloads import references, report, scaling
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


def check_plan(plan: Plan, sizes: list[int], target: Target) -> None:
    if not sizes or any(n < 1 for n in sizes):
        raise BadInput(f"--gpus wants worker counts of 1 or more, got {sizes}")
    if plan.data != "synthetic" and not Path(plan.data).is_dir() and target.launcher == "local":
        raise BadInput(f"--data {plan.data}: no such folder (use 'synthetic' or TFRecords from the converter)")
    if target.launcher == "local" and target.gpus_per_host and max(sizes) > target.gpus_per_host:
        raise BadInput(
            f"--gpus {max(sizes)} on {target.where}, which has {target.gpus_per_host} GPUs: exactly one "
            "worker per GPU (more only caps throughput); use --launcher ssh/slurm for more"
        )
    cores = os.cpu_count() or 1
    if target.launcher == "local" and not target.gpus_per_host and max(sizes) > cores:
        raise BadInput(
            f"--gpus {max(sizes)} on {target.where}, which has no GPU and {cores} CPU cores: at most one "
            "worker per core on CPU"
        )


def trained_check(launch: Launch, plan: Plan, where: str) -> Check:
    cid, n = f"training.{launch.workers}w.trained", launch.workers
    evidence = f"log: {launch.log}" if launch.log else ""
    if launch.problem:
        return failed(
            cid,
            where,
            f"{n}-worker run failed: {launch.problem}",
            evidence,
            "read the log; check that every host can run `python -m gpuready.workloads.train --help`",
        )
    short = [r["rank"] for r in launch.results if len(r["step_times"]) != plan.steps]
    if short:
        return failed(cid, where, f"workers {short} timed fewer than {plan.steps} steps", evidence)
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
    for n in sizes:
        note(
            f"training {plan.model} on {n} worker{'s' if n > 1 else ''} ({target.launcher}, {plan.distribution}, "
            f"{plan.steps} steps of {plan.batch_size} images per worker)..."
        )
        launched = launch(plan, n, folder)
        if launched.written_only:
            result.add(skipped(f"training.{n}w.trained", target.where, launched.written_only))
            continue
        check = trained_check(launched, plan, target.where)
        result.add(check)
        if check.status == "passed":
            runs[n] = launched.results
    if not runs:
        return []
    report.save_raw(folder, runs)
    rows = scaling.sweep_figures(runs)
    for row in rows:
        n = row["workers"]
        ref = references.find(target.references, gpu_model=target.gpu_model, model=plan.model, gpus=n)
        verdict = references.judge(row["images_per_second"], ref)
        cid = f"training.{n}w.images_per_second"
        if verdict.ok is False:
            result.add(
                failed(
                    cid,
                    target.where,
                    verdict.message,
                    remedy="profile the GPUs for idle time and check "
                    "the input pipeline, binding (mpirun --map-by socket) and interconnect",
                )
            )
        else:
            result.add(passed(cid, target.where, verdict.message))
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
    setup = {
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
        "xla": plan.xla,
        "launcher": target.launcher,
        "gpu_model": target.gpu_model or "none (CPU)",
        "where": target.where,
    }
    report.write(folder, rows, setup)
    result.metrics.update({"training": {**setup, "sizes": rows}})
    for row in rows:
        n = row["workers"]
        result.metrics[f"images_per_second_{n}w"] = row["images_per_second"]
        result.metrics[f"images_per_second_per_worker_{n}w"] = row["images_per_second_per_worker"]
        result.metrics[f"efficiency_{n}w"] = row["efficiency"]
    return rows
