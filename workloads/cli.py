"""``gpuready report compare`` and ``report collect``: training reports built from earlier runs and from job output
(the ``report`` group itself is gpuready.core.report.cli)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuready.core.command import Context, FiniteFloatRange, artifacts_option, execute

if TYPE_CHECKING:
    from gpuready.core.results import RunResult


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, metavar="RUN[=LABEL]...")
@click.option(
    "--max-overhead",
    type=FiniteFloatRange(0),
    default=None,
    metavar="PCT",
    help="Fail when a run is more than PCT% slower than the first at any worker count [default: record only].",
)
@artifacts_option
def compare(runs: tuple[str, ...], max_overhead: float | None, artifacts: Path | None) -> None:
    """Put `validate training` runs side by side: images/s per worker count and each run's overhead
    against the first (the seeds: bare metal about 8% ahead of Kubernetes at 8 GPUs). RUN is a run
    folder or its number in the artifacts folder; =LABEL names it in the table.

    \b
      gpuready report compare 3=bare-metal 7=kubernetes
    """
    ctx = Context("report compare", Path(""), artifacts, 0, options={"runs": runs, "max_overhead": max_overhead})
    execute(ctx, _body)


def _body(ctx: Context) -> RunResult:
    from gpuready.core import run_folders
    from gpuready.core.artifacts import write_text
    from gpuready.core.errors import BadInput
    from gpuready.core.results import failed, passed
    from gpuready.workloads.controller import compare, compare_view

    specs = ctx.options["runs"]
    if len(specs) < 2:
        raise BadInput("give at least two runs to compare (the first is the baseline)")
    runs = [compare.load(run_folders.with_folder(s, ctx.artifacts_root)) for s in specs]
    rows = compare.table(runs)
    result = ctx.new_result()
    result.inventory = ""  # a comparison reads run folders, no inventory
    result.metrics["runs"] = len(runs)
    limit = ctx.options["max_overhead"]
    for row in rows:
        for cell in row["runs"][1:]:
            cid, where = f"compare.{row['workers']}w.overhead", cell["label"]
            if cell["overhead_percent"] is None:
                continue
            message = (
                f"{cell['images_per_second']:.1f} images/s, {cell['overhead_percent']:+.1f}% against {runs[0].label}"
            )
            if limit is not None and cell["overhead_percent"] > limit:
                result.add(failed(cid, where, f"{message}: more than {limit:g}%"))
            else:
                result.add(passed(cid, where, message + ("" if limit is not None else " (recorded)")))
    write_text(ctx.run_dir / "comparison.md", compare.markdown(rows, runs))
    compare.plot(runs, ctx.run_dir / compare.PLOT_FILE)
    result.metrics["comparison"] = rows
    compare_view.show(ctx.console, rows, runs)
    return result


@click.command("collect")
@click.argument("outputs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="OUTPUT...")
@artifacts_option
def collect(outputs: tuple[Path, ...], artifacts: Path | None) -> None:
    """Read the output files of training jobs submitted by hand (one per worker count, e.g. the
    slurm-Nw-JOBID.out of each `train-Nw.sbatch` that `validate training --launcher slurm` wrote) into
    the same checks, figures and report as a run gpuready launched.

      gpuready report collect slurm-1w-4411.out slurm-2w-4412.out slurm-8w-4413.out
    """
    ctx = Context("report collect", Path(""), artifacts, 0, options={"outputs": [str(p) for p in outputs]})
    execute(ctx, _collect)


def _collect(ctx: Context) -> RunResult:
    from gpuready.workloads.controller import collect as collecting
    from gpuready.workloads.controller.report import show

    result = ctx.new_result()
    rows = collecting.run([Path(p) for p in ctx.options["outputs"]], ctx.run_dir, result, lambda _message: None)
    if rows:
        show(ctx.console, rows, ctx.run_dir)
    return result
