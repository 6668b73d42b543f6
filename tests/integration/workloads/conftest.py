"""A real PyTorch DDP sweep on this machine's CPU, run once and read by every test of what it prints and writes."""

from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import gpuready, require
from tests.training_sizes import SMALL

#: The smallest run that still trains: one warm-up step and two timed ones per size.
PYTORCH_CPU = ["--framework", "pytorch", *SMALL, "--cpu"]


@dataclass(frozen=True)
class Sweep:
    done: subprocess.CompletedProcess[str]
    runs: Path
    metrics: Path


@pytest.fixture(scope="session")
def pytorch_cpu_sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """`validate training --gpus 1,2` on the CPU with `--metrics`, as a user runs it. The modules that read it
    share an xdist group (tests/conftest.py), so the sweep runs once per test run, not once per module."""
    require(
        importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"),
        "torch and torchvision not installed (make .venv/.stamp-torch)",
    )
    folder = tmp_path_factory.mktemp("pytorch-cpu-sweep")
    runs, metrics = folder / "runs", folder / "training.prom"
    done = gpuready(
        "validate", "training", "--gpus", "1,2", *PYTORCH_CPU, "--artifacts", str(runs), "--metrics", str(metrics)
    )
    return Sweep(done, runs, metrics)
