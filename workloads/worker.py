"""What the workers of both frameworks share: their common options, when to compile, the one-line refusal
without a GPU, the timed steps and the compile time, AUROC, and the ``GPUREADY_RESULT {json}`` line every
launcher collects."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuready.workloads.dataset.reading import PIPELINES, Reading

RESULT_PREFIX = "GPUREADY_RESULT "
#: Rank 0's progress lines (how far the steps are, images/s so far), which the controller relays.
PROGRESS_PREFIX = "GPUREADY_PROGRESS "
#: when this worker's interpreter got here: launcher overhead is measured from the command to the first step
PROCESS_START_UNIX = time.time()
COMPILE_MODES = ("auto", "on", "off")


def common_arguments(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The options both frameworks' smoke trainings take, with the same names and defaults, so a launcher
    passes one set of options whichever framework runs."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="densenet121", choices=("densenet121", "resnet50"))
    p.add_argument("--batch-size", type=int, default=32, help="images per worker and step")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--steps", type=int, default=50, help="timed steps, after the warm-up")
    p.add_argument("--warmup-steps", type=int, default=10, help="steps run first and not timed")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a folder of TFRecords made by the converter")
    p.add_argument("--pipeline", default="new", choices=PIPELINES)
    p.add_argument("--learning-rate", type=float, default=1e-3, help="for one worker; scaled by the worker count")
    p.add_argument("--eval-batches", type=int, default=0, help="held-out batches for AUROC (real data only)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads per worker (0: cores / local workers)")
    p.add_argument("--out", default="", help="also write rank-N.json here")
    p.add_argument("--cpu", action="store_true", help="train on the CPU on purpose, even where a GPU is visible")
    p.add_argument(
        "--progress-seconds",
        type=float,
        default=30,
        help="rank 0 prints its step and images/s so far at most this often (0: never)",
    )
    p.add_argument(
        "--compile",
        default="auto",
        choices=COMPILE_MODES,
        help="graph compilation (torch.compile; XLA for TensorFlow): auto = on GPUs only",
    )
    return p


def evaluation(args: argparse.Namespace) -> Reading:
    """How the held-out records are read for AUROC: in order, once, in the training's batch and image size."""
    return Reading(args.batch_size, args.image_size, training=False, epochs=1)


def compiles(mode: str, on_gpu: bool) -> bool:
    """auto compiles on GPUs only: on the CPU, compiling DenseNet-121 takes minutes for a few-step smoke run."""
    return mode == "on" or (mode == "auto" and on_gpu)


def no_gpu(framework: str, found: str) -> None:
    """A worker asked for a GPU that has none stops in one line, so a CPU run never passes as a GPU check."""
    sys.stderr.write(
        f"gpuready {framework} worker: no GPU visible to this worker ({found}): train where the GPUs are, "
        "or pass --cpu to train on the CPU on purpose\n"
    )
    sys.stderr.flush()
    raise SystemExit(2)


def compile_seconds(warmup_times: list[float], step_times: list[float]) -> float:
    """What the first step took beyond a timed step's median: tracing, compiling and autotuning, which the
    images/s leave out (the first step is never timed)."""
    if not warmup_times:
        return 0.0
    import statistics

    typical = statistics.median(step_times) if step_times else 0.0
    return round(max(0.0, warmup_times[0] - typical), 3)


def auroc(labels: Any, scores: Any) -> list[float | None]:
    """Per-label area under the ROC curve (Mann-Whitney); None where a label has no positive or no negative."""
    result: list[float | None] = []
    for y, s in zip(labels.T, scores.T, strict=True):
        pos, neg = int(y.sum()), int(len(y) - y.sum())
        if not pos or not neg:
            result.append(None)
            continue
        ranks = s.argsort().argsort() + 1.0
        result.append(float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)))
    return result


def emit(result: dict[str, Any], out: str) -> None:
    """The worker's result line on stdout (what launchers collect), and in ``out``/rank-N.json when asked."""
    line = json.dumps(result)
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"rank-{result['rank']}.json"), "w") as fh:
            fh.write(line + "\n")
    sys.stdout.write(RESULT_PREFIX + line + "\n")
    sys.stdout.flush()


class Progress:
    """Rank 0's progress: after a step, when ``every_s`` seconds passed since the last line (and after the
    last step), one ``GPUREADY_PROGRESS {json}`` line with the step, the steps in all and, once timed steps
    ran, the job's images/s so far (this worker's, times the workers: the launcher's log may hold only rank 0's
    lines). The other ranks print nothing, so the lines do not grow with the workers."""

    def __init__(self, every_s: float, rank: int, workers: int, warmup: int, steps: int, batch_size: int) -> None:
        self.every_s, self.on = every_s, rank == 0 and every_s > 0
        self.workers, self.warmup, self.total, self.batch_size = workers, warmup, warmup + steps, batch_size
        self.last = time.monotonic()

    def step(self, done: int, step_times: list[float]) -> None:
        """After ``done`` steps (warm-up ones included), ``step_times`` the timed ones so far."""
        now = time.monotonic()
        if not self.on or (now - self.last < self.every_s and done < self.total):
            return
        self.last = now
        line: dict[str, Any] = {"step": done, "steps": self.total, "warmup": done <= self.warmup}
        if step_times:
            line["images_per_second"] = round(self.batch_size * self.workers * len(step_times) / sum(step_times), 2)
        sys.stdout.write(PROGRESS_PREFIX + json.dumps(line) + "\n")
        sys.stdout.flush()


@dataclass
class Timing:
    """What :func:`timed_steps` measured: the losses of every step, the warm-up steps' and the timed steps'
    seconds, and when the first step began."""

    warmup: int
    first_step_unix: float
    losses: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    warmup_times: list[float] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """The result line's fields for the steps: from them the report recomputes every figure."""
        return {
            "compile_s": compile_seconds(self.warmup_times, self.step_times),
            "warmup_steps": self.warmup,
            "warmup_step_times": self.warmup_times,
            "process_start_unix": PROCESS_START_UNIX,
            "first_step_unix": self.first_step_unix,
            "step_times": self.step_times,
            "losses": self.losses,
        }


def timed_steps(
    args: argparse.Namespace,
    rank: int,
    workers: int,
    step: Callable[[], float],
    after_first: Callable[[], None] = lambda: None,
) -> Timing:
    """``--warmup-steps`` (at least one: the first step compiles, traces or autotunes, so it is never timed) and
    then ``--steps`` timed steps, each timed with fetching its batch; ``step`` returns the loss once the step
    has finished, so the time is the real one. ``after_first`` runs after the first step, outside its time."""
    warmup = max(1, args.warmup_steps)
    progress = Progress(args.progress_seconds, rank, workers, warmup, args.steps, args.batch_size)
    timing = Timing(warmup, first_step_unix=time.time())
    for i in range(timing.warmup + args.steps):
        start = time.perf_counter()
        loss = step()
        elapsed = time.perf_counter() - start
        if i == 0:
            after_first()
        timing.losses.append(loss)
        (timing.step_times if i >= timing.warmup else timing.warmup_times).append(elapsed)
        progress.step(i + 1, timing.step_times)
    return timing
