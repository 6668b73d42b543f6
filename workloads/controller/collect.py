"""Read back job output written by a script submitted by hand (an sbatch script on a login node, an
mpirun in a terminal): the workers' ``GPUREADY_RESULT`` lines become the same checks, figures and
report as a run gpuready launched itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput
from gpuready.core.results import RunResult
from gpuready.workloads.controller import sweep
from gpuready.workloads.launchers import Launch, Plan, parse_results
from gpuready.workloads.launchers.targets import Target


def read(paths: list[Path]) -> dict[int, Launch]:
    """One launch per job size, from the output files that hold its workers' result lines."""
    by_size: dict[int, Launch] = {}
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError as e:
            raise BadInput(f"{path}: cannot read ({e.strerror})") from e
        results = parse_results(text)
        if not results:
            raise BadInput(f"{path}: no GPUREADY_RESULT lines (not the output of gpuready's training job?)")
        sizes = {int(r["size"]) for r in results}
        if len(sizes) > 1:
            raise BadInput(f"{path}: results of jobs of different sizes {sorted(sizes)}; give one job per file")
        size = sizes.pop()
        if size in by_size:
            raise BadInput(f"{path}: a second {size}-worker job (also in {by_size[size].log}); give one per size")
        launch = Launch(size, log=path)
        launch.collect()  # the same reading, and the same "3/4 workers reported" problem, as a launched run
        by_size[size] = launch
    return by_size


def plan_of(launches: dict[int, Launch]) -> Plan:
    """What the workers ran, from their own results; every job must have run the same plan."""
    seen = {
        (
            r["model"],
            r["batch_size"],
            r["image_size"],
            len(r["step_times"]),
            r["warmup_steps"],
            r["data"],
            r["pipeline"],
            r["distribution"],
            r["mixed_precision"],
            r.get("compile", "on" if r["xla"] else "off"),
            r.get("framework", "tensorflow"),
            str(r.get("device", "")).startswith("CPU"),
        )
        for launch in launches.values()
        for r in launch.results
    }
    if len(seen) != 1:
        raise BadInput(
            f"the outputs ran {len(seen)} different settings (model, batch, image size, steps...); "
            "collect one sweep at a time"
        )
    model, batch, image, steps, warmup, data, pipeline, distribution, mixed, compile_mode, framework, cpu = seen.pop()
    return Plan(
        model=model,
        batch_size=batch,
        image_size=image,
        steps=steps,
        warmup_steps=warmup,
        data=data,
        pipeline=pipeline,
        distribution=distribution,
        mixed_precision=mixed,
        compile=compile_mode,
        cpu=cpu,
        framework=framework,
    )


def run(paths: list[Path], folder: Path, result: RunResult, note: Callable[[str], None]) -> list[dict[str, Any]]:
    launches = read(paths)
    plan = plan_of({n: launch for n, launch in launches.items() if launch.results})
    hosts = sorted({r["host"] for launch in launches.values() for r in launch.results})
    where = hosts[0] if len(hosts) == 1 else f"{hosts[0]} (+{len(hosts) - 1})"
    target = Target("collected", where, "", 0)
    return sweep.run(plan, sorted(launches), target, folder, result, lambda _plan, n, _folder: launches[n], note)
