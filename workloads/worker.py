"""What the workers of both frameworks share: their common options, when to compile, the one-line refusal
without a GPU, the compile time, AUROC, and the ``GPUREADY_RESULT {json}`` line every launcher collects."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

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
    p.add_argument("--pipeline", default="new", choices=("new", "old"))
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
