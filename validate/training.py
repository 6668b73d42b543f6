"""``gpuready validate training``: the CheXNet smoke run over 1..N workers, judged against references."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuready.core.command import Context, common_options, execute, limit_option
from gpuready.core.report.metrics import metrics_option

if TYPE_CHECKING:
    from gpuready.core.results import RunResult


#: No sweep needs more workers than this; a larger number is a typo, refused before anything starts.
MAX_WORKERS = 4096


def _sizes(value: str) -> list[int]:
    from gpuready.core.errors import BadInput

    example = "give worker counts like 1,2,4,8"
    parts = [v.strip() for v in value.split(",")]
    if not any(parts) or not all(parts):
        raise BadInput(f"--gpus {value!r}: an empty item; {example}")
    try:
        sizes = [int(v) for v in parts]
    except ValueError:
        raise BadInput(f"--gpus {value!r}: {example}") from None
    if min(sizes) < 1 or max(sizes) > MAX_WORKERS:
        raise BadInput(f"--gpus {value!r}: give worker counts of 1 or more, at most {MAX_WORKERS}")
    if len(set(sizes)) != len(sizes):
        raise BadInput(f"--gpus {value!r}: a worker count given twice; {example}")
    return sorted(sizes)


@click.command("training")
@common_options
@metrics_option
@limit_option
@click.option(
    "--launcher",
    type=click.Choice(["local", "ssh", "slurm", "kubernetes"]),
    default=None,
    help="Where the workers run [default: the inventory's training.launcher].",
)
@click.option(
    "--ssh-runner",
    type=click.Choice(["horovodrun", "mpirun"]),
    default=None,
    help="ssh launcher: horovodrun --gloo or mpirun [default: the inventory's training.ssh_runner].",
)
@click.option(
    "--gpus",
    default=None,
    metavar="N[,N...]",
    help="Worker counts to sweep, one worker per GPU (with --cpu: processes), e.g. 1,2,4,8.",
)
@click.option(
    "--cpu",
    "cpu",
    is_flag=True,
    default=None,
    help="Train on the CPU on purpose (processes, not GPUs); the run is labelled CPU and judged as one. "
    "Without it, --gpus N needs N GPUs.",
)
@click.option(
    "--model",
    type=click.Choice(["densenet121", "resnet50"]),
    default=None,
    help="The network: densenet121 (CheXNet) or resnet50 (default: gpuready.training.model, densenet121).",
)
@click.option("--steps", type=click.IntRange(1), default=None, help="Timed steps per run.")
@click.option(
    "--warmup-steps", type=click.IntRange(0), default=None, help="Untimed steps first (at least 1 runs: it compiles)."
)
@click.option("--batch-size", type=click.IntRange(1), default=None, help="Images per worker and step.")
@click.option("--image-size", type=click.IntRange(32), default=None, help="Input side in pixels.")
@click.option("--data", default=None, help="'synthetic' or a folder of TFRecords from the converter.")
@click.option("--pipeline", type=click.Choice(["new", "old"]), default=None, help="tf.data pipeline (real data).")
@click.option(
    "--framework",
    type=click.Choice(["tensorflow", "pytorch"]),
    default=None,
    help="TensorFlow (Horovod/MWMS) or PyTorch (DDP under torchrun) [default: the inventory's].",
)
@click.option(
    "--distribution",
    type=click.Choice(["horovod", "mwms"]),
    default=None,
    help="TensorFlow: Horovod, or tf.distribute MultiWorkerMirroredStrategy.",
)
@click.option(
    "--mixed-precision/--no-mixed-precision",
    default=None,
    help="TensorFlow: float16 with loss scaling; PyTorch: bf16 autocast.",
)
@click.option("--xla/--no-xla", default=None, help="TensorFlow: XLA [default: on GPUs, unless --eager].")
@click.option(
    "--eager",
    is_flag=True,
    default=None,
    help="No graph compilation: neither torch.compile nor XLA [default: both compile on GPUs].",
)
@click.option(
    "--scaling-floor",
    type=click.FloatRange(0, 1),
    default=None,
    help="On GPUs, fail a size whose weak-scaling efficiency is below this fraction [default: 0.9].",
)
@click.option(
    "--cpu-threads",
    type=click.IntRange(0),
    default=None,
    help="CPU threads per worker when training on CPU (0: its share of the host's cores).",
)
@click.option(
    "--progress",
    "progress_s",
    type=click.FloatRange(0),
    default=None,
    help="Seconds between the progress lines on stderr (step, images/s so far; 0: none) [default: 30].",
)
@click.option("--timeout", "timeout_s", type=click.IntRange(10), default=None, help="Seconds per run.")
def training(inventory_path: Path, artifacts: Path | None, verbose: int, limit: str | None, **overrides: Any) -> None:
    """Train CheXNet for a few steps on 1..N workers and judge images/s against references.

    Saves each worker's raw step times, the scaling table and curve (training.md, scaling.png)
    in the run folder. Examples:

    \b
      gpuready validate training --framework pytorch --gpus 1 --mixed-precision --batch-size 256

      gpuready validate training -i inventories/baremetal-c4140 --launcher slurm --gpus 1,2,4,8

      gpuready validate training --cpu --gpus 1,2 --steps 5 --image-size 64 --batch-size 4   # no GPU here
    """
    ctx = Context(
        "validate training",
        inventory_path,
        artifacts,
        verbose,
        options={"limit": limit, **{k: v for k, v in overrides.items() if v is not None}},
    )
    execute(ctx, _body)


def _body(ctx: Context) -> RunResult:
    from gpuready.core.errors import BadInput
    from gpuready.workloads import smoke_run

    options = dict(ctx.options)
    if "gpus" in options:
        options["gpus"] = _sizes(options["gpus"])
    settings = ctx.inventory.settings.training.model_copy(
        update={k: v for k, v in options.items() if k in type(ctx.inventory.settings.training).model_fields}
    )
    if settings.framework == "pytorch":
        for flag in ("distribution", "xla"):
            if options.get(flag):
                raise BadInput(
                    f"--{flag} is for --framework tensorflow; PyTorch runs DistributedDataParallel "
                    "(bf16: --mixed-precision; no torch.compile: --eager)"
                )
        settings = settings.model_copy(update={"distribution": "ddp", "xla": None})
    if settings.eager and settings.xla:
        raise BadInput("--eager turns XLA off and --xla (or training.xla) on: give one of them")
    result = smoke_run.run(ctx, settings, cpu=bool(options.get("cpu")))
    record_figures(result)
    return result


#: A sweep row's figures: key -> (figure name, unit).
SIZE_FIGURES = {
    "images_per_second": ("training", "images/s"),
    "images_per_second_per_worker": ("training_worker", "images/s"),
    "efficiency": ("training_scaling_efficiency", "ratio"),
    "step_time_median_s": ("training_step_time_median", "s"),
    "compile_s": ("training_compile", "s"),
    "mean_auroc": ("training_mean_auroc", "ratio"),
}


def record_figures(result: RunResult) -> None:
    """Each size's figures, labelled with where it ran, its worker count and device (CPU or GPU); and each
    worker's images/s, labelled with its rank, its host and its GPU where the worker reported one."""
    from gpuready.core import figures

    training = result.metrics.get("training") or {}
    for row in training.get("sizes", []):
        labels = {
            "host": training.get("where", ""),
            "workers": row["workers"],
            "device": row.get("device", ""),
            "gpu_model": training.get("gpu_model", ""),
            "model": training.get("model", ""),
            "framework": training.get("framework", ""),
        }
        for key, (name, unit) in SIZE_FIGURES.items():
            if isinstance(row.get(key), int | float):
                figures.record(result, name, unit, row[key], **labels)
        for rank in row.get("ranks") or []:
            if isinstance(rank, dict) and isinstance(rank.get("images_per_second"), int | float):
                whose = {**labels, "host": rank.get("host", ""), "rank": rank.get("rank"), "gpu": rank.get("gpu")}
                figures.record(result, "training_rank", "images/s", rank["images_per_second"], **whose)
