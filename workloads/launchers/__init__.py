"""Launchers: start one training process per GPU somewhere, and collect each worker's result line.

Every launcher gets a :class:`Plan` and a worker count and returns a :class:`Launch`; workers
print ``GPUREADY_RESULT {json}`` (see :mod:`gpuready.workloads.tensorflow.train`), which reaches us through
horovodrun's or mpirun's output, a Slurm output file, or a pod's log alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready.core import docs
from gpuready.core.errors import Unreachable

LAUNCHERS = ("local", "ssh", "slurm", "kubernetes")
_RESULT = re.compile(r"GPUREADY_RESULT (\{.*\})\s*$")


@dataclass(frozen=True)
class Plan:
    """What every worker runs; the launcher decides where."""

    model: str = "densenet121"
    batch_size: int = 32
    image_size: int = 224
    steps: int = 50
    warmup_steps: int = 10
    data: str = "synthetic"
    pipeline: str = "new"
    distribution: str = "horovod"
    mixed_precision: bool = False
    #: graph compilation (torch.compile, or XLA for TensorFlow): auto compiles on GPUs only
    compile: str = "auto"
    #: train on the CPU on purpose: without it a worker that finds no GPU stops, and is never judged a GPU
    cpu: bool = False
    eval_batches: int = 0
    timeout_s: int = 1800
    #: tensorflow (Horovod or MultiWorkerMirroredStrategy) or pytorch (DDP under torchrun)
    framework: str = "tensorflow"
    #: CPU threads per worker when training on CPU (0: the worker's share of this host's cores)
    cpu_threads: int = 0
    #: rank 0 prints how far it is at most this often, in seconds (0: never)
    progress_s: float = 30

    @property
    def module(self) -> list[str]:
        """The worker's ``-m`` module: the TensorFlow or the PyTorch entry point."""
        return TORCH_MODULE if self.framework == "pytorch" else TRAIN_MODULE

    def train_args(self) -> list[str]:
        args = [
            "--model",
            self.model,
            "--batch-size",
            str(self.batch_size),
            "--image-size",
            str(self.image_size),
            "--steps",
            str(self.steps),
            "--warmup-steps",
            str(self.warmup_steps),
            "--data",
            self.data,
            "--pipeline",
            self.pipeline,
        ]
        if self.framework != "pytorch":
            args += ["--distribution", self.distribution]
        if self.mixed_precision:
            args.append("--mixed-precision")
        if self.compile != "auto":  # left out at the default, so an older worker still takes the command
            args += ["--compile", self.compile]
        if self.cpu:
            args.append("--cpu")
        if self.eval_batches:
            args += ["--eval-batches", str(self.eval_batches)]
        if self.cpu_threads:
            args += ["--threads", str(self.cpu_threads)]
        if self.progress_s != 30:  # left out at the default, so an older worker still takes the command
            args += ["--progress-seconds", f"{self.progress_s:g}"]
        return args


@dataclass
class Launch:
    """What one size of the sweep gave: the workers' results, where the log is, and what went wrong."""

    workers: int
    results: list[dict[str, Any]] = field(default_factory=list)
    log: Path | None = None
    returncode: int | None = None
    #: set when nothing was run on purpose (a job script written out for the user to submit)
    written_only: str = ""
    problem: str = ""

    def collect(self) -> Launch:
        """Read the workers' results from the log; say what went wrong if any worker is missing."""
        text = self.log.read_text(errors="replace") if self.log else ""
        self.results = parse_results(text)
        if not self.problem and (self.returncode or len(self.results) != self.workers):
            self.problem = f"exit {self.returncode}, {len(self.results)}/{self.workers} workers reported: {tail(text)}"
        return self


def parse_results(text: str) -> list[dict[str, Any]]:
    """The result line of each worker, by rank (a rank seen twice counts once)."""
    found: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        match = _RESULT.search(line)
        if match:
            result = json.loads(match.group(1))
            found[int(result["rank"])] = result
    return [found[r] for r in sorted(found)]


#: a worker's own one-line refusal (no GPU, ...): the reason, ahead of whatever its launcher printed after it
_WORKER_SAYS = re.compile(r"gpuready (?:pytorch|tensorflow) worker: .*")


def tail(text: str, lines: int = 3) -> str:
    said = _WORKER_SAYS.search(text)
    if said:
        return said.group(0).strip()
    kept = [ln for ln in text.splitlines() if ln.strip() and "GPUREADY_RESULT" not in ln]
    return " | ".join(kept[-lines:])


def require_local_training(distribution: str, framework: str = "tensorflow") -> None:
    """Refuse early, with the fix, when this Python cannot train (checked without importing the framework)."""
    if framework == "pytorch":
        missing = [m for m in ("torch", "torchvision") if importlib.util.find_spec(m) is None]
        if missing:
            raise Unreachable(
                f"{' and '.join(missing)} not installed in {sys.prefix}: "
                f"pip install 'gpuready[torch]' (see {docs.page('pytorch.md')})"
            )
        return
    needed = ["tensorflow"] + (["horovod"] if distribution == "horovod" else [])
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        where = (
            ""
            if sys.version_info[:2] == (3, 11)
            else f" (the train extra needs Python 3.11; this is {sys.version_info[0]}.{sys.version_info[1]}: "
            "or use --framework pytorch)"
        )
        other = ", or use --distribution mwms (TensorFlow alone)" if distribution == "horovod" else ""
        raise Unreachable(
            f"{' and '.join(missing)} not installed in {sys.prefix}: {install_advice(missing)}{other}{where}"
        )


#: TensorFlow 2.15.1 and Horovod 0.28.1 (the train extra's pins). Horovod compiles against the TensorFlow it
#: finds, so it is built after it, without pip's build isolation (an isolated build sees no TensorFlow and
#: fails in CMake); Horovod's install guide (docs/install.rst) needs CMake 3.13 or newer and a C++ compiler.
TENSORFLOW_REQUIREMENT = "tensorflow==2.15.1"
HOROVOD_REQUIREMENT = "horovod==0.28.1"
#: The Gloo-only build: no MPI, PyTorch or MXNet bindings (Horovod's docs/install.rst, "Environment Variables").
HOROVOD_BUILD_ENV = (
    "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 "
    "HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO"
)


def install_advice(missing: list[str]) -> str:
    """The commands that install what is missing into this Python, runnable as printed."""
    pip = f"{sys.executable} -m pip install"
    steps = []
    if "tensorflow" in missing:
        steps.append(f"{pip} '{TENSORFLOW_REQUIREMENT}'")
    if "horovod" in missing:
        steps.append(f"{HOROVOD_BUILD_ENV} {pip} --no-build-isolation '{HOROVOD_REQUIREMENT}' (needs cmake and g++)")
    return " && ".join(steps) + f" (see {docs.page('training.md', 'Installing TensorFlow and Horovod')})"


def horovodrun() -> str:
    beside = Path(sys.executable).with_name("horovodrun")
    found = str(beside) if beside.exists() else shutil.which("horovodrun")
    if not found:
        raise Unreachable(f"horovodrun not found: {install_advice(['horovod'])}")
    return found


def worker_env() -> dict[str, str]:
    # TensorFlow's C++ info lines would drown the workers' output; warnings and errors still show.
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1"), "PYTHONUNBUFFERED": "1"}


TRAIN_MODULE = ["-m", "gpuready.workloads.tensorflow.train"]
TORCH_MODULE = ["-m", "gpuready.workloads.pytorch.train"]
#: torchrun's rendezvous port on the first host (ssh and Slurm launchers)
RENDEZVOUS_PORT = 29400


def torchrun_args(nodes: int, per_node: int, endpoint: str, job_id: str) -> list[str]:
    """torchrun's options for ``nodes`` hosts of ``per_node`` workers meeting at ``endpoint`` (c10d rendezvous)."""
    return [
        "--nnodes",
        str(nodes),
        "--nproc-per-node",
        str(per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        job_id,
    ]
