"""The smoke run's torch.compile path on the CPU, on a tiny model (DenseNet-121 compiles for minutes there):
the compiled artefacts land under the user's cache folder, and a second process compiles from them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

pytestmark = pytest.mark.slow

#: a worker's compile step as torch_train does it (use_cache_dir before torch compiles, compile_model), on a
#: model small enough to compile on a shared 2-core machine; prints the caches' counters
COMPILE = """
import json
from gpuready.workloads.pytorch import train as torch_train
folder = torch_train.use_cache_dir()
import torch
from torch._dynamo.utils import counters
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 2)
)
compiled = torch_train.compile_model(model, True)
compiled(torch.randn(2, 3, 8, 8)).sum().backward()
print(json.dumps({"folder": folder, "inductor": dict(counters["inductor"]), "aot": dict(counters["aot_autograd"])}))
"""


def _compile(cache_home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "TRITON_"))}
    done = subprocess.run(
        [sys.executable, "-c", COMPILE],
        capture_output=True,
        text=True,
        timeout=900,
        env={**env, "XDG_CACHE_HOME": str(cache_home)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_run_compiles_from_the_cache_under_the_users_cache_folder(tmp_path: Path) -> None:
    require(importlib.util.find_spec("torch") and shutil.which("g++"), "torch and a C++ compiler (for Inductor on CPU)")
    first = _compile(tmp_path / "cache")
    folder = tmp_path / "cache" / "gpuready" / "torchinductor"
    assert first["folder"] == str(folder)
    assert first["inductor"].get("fxgraph_cache_miss", 0) >= 1 and not first["inductor"].get("fxgraph_cache_hit")
    assert (folder / "fxgraph").is_dir() and (folder / "aotautograd").is_dir()
    second = _compile(tmp_path / "cache")
    assert second["inductor"].get("fxgraph_cache_hit", 0) >= 1 and not second["inductor"].get("fxgraph_cache_miss")
    assert second["aot"].get("autograd_cache_hit") == 1
