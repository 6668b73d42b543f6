"""The way in for ``validate training``: a CheXNet smoke run over 1..N workers, from the training settings
to the checks, the figures and the report. The rest of the package is free to change behind it."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuready.core.command import Context
    from gpuready.core.results import RunResult
    from gpuready.core.settings import Training
    from gpuready.workloads.launchers import Plan


def compile_mode(eager: bool, xla: bool | None) -> str:
    """The workers' --compile: off when eager (or XLA turned off), on when XLA is asked for, else auto (GPUs only)."""
    if eager or xla is False:
        return "off"
    return "on" if xla else "auto"


def plan_for(settings: Training, cpu: bool) -> Plan:
    """What every worker runs, from the training settings."""
    from gpuready.workloads.launchers import Plan

    # Every Plan field but the two worked out here has a training setting of the same name.
    given = {
        field.name: getattr(settings, field.name) for field in fields(Plan) if field.name not in ("compile", "cpu")
    }
    return Plan(**given, compile=compile_mode(settings.eager, settings.xla), cpu=cpu)


def run(ctx: Context, settings: Training, *, cpu: bool) -> RunResult:
    """Sweep the worker counts of ``settings.gpus`` where the inventory (and ``--limit``) puts them, with the
    launcher the settings name; the run's checks and figures go to the result, its report to the run folder."""
    from gpuready.workloads.controller import sweep
    from gpuready.workloads.controller.report import show
    from gpuready.workloads.launchers.targets import launcher_for, target_for

    plan = plan_for(settings, cpu)
    limit = ctx.options.get("limit")
    target = target_for(ctx.inventory, settings, limit)
    sweep.check_plan(plan, settings.gpus, target)  # before the run folder exists: bad input leaves nothing behind
    result = ctx.new_result()
    rows = sweep.run(
        plan,
        settings.gpus,
        target,
        ctx.run_dir,
        result,
        launcher_for(ctx.inventory, settings, target, limit),
        ctx.note,
    )
    if rows:
        show(ctx.console, rows, ctx.run_dir)
    return result
