"""gpuready's wheel installs and runs on the oldest and newest supported Pythons (3.10 and 3.13).

Installed as on a GPU machine: the wheel without its dependencies, plus only what
benchmarks/gpu/node-requirements.txt lists (small, mostly pure Python). Then the CLI answers,
the runbook's recorder records a replayed H100 node, and `validate gpu-node` judges the recording.
A missing interpreter skips, also under CI=true: the quick start promises Python 3.11 only
(docs/python-versions.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpuready.lab import replay
from tests.conftest import ROOT
from tests.pythons import find_python

pytestmark = pytest.mark.slow
RECORDER = ROOT / "benchmarks" / "gpu" / "record.py"


@pytest.mark.parametrize("version", ["3.10", "3.13"])
def test_wheel_runs_node_checks_with_light_dependencies(version: str, gpuready_wheel: Path, tmp_path: Path) -> None:
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} here (pyenv install {version}); see docs/python-versions.md")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(gpuready_wheel)], check=True, timeout=300)
    subprocess.run([*pip, "-r", str(ROOT / "benchmarks" / "gpu" / "node-requirements.txt")], check=True, timeout=600)
    cli = str(venv / "bin" / "gpuready")
    for argv in (["--help"], ["validate", "gpu-node", "--help"], ["validate", "training", "--help"]):
        done = subprocess.run([cli, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert "--framework" in done.stdout

    tools = replay.build("h100-x8", tmp_path / "replay")
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    recorded = tmp_path / "recorded"
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(RECORDER), str(recorded)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "8x NVIDIA H100 80GB HBM3, driver 535.54.03" in done.stdout
    done = subprocess.run(
        [cli, "validate", "gpu-node", "-i", str(recorded / "inventory"), "--artifacts", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert "Traceback" not in done.stderr
    (summary,) = (tmp_path / "runs").glob("*/summary.json")
    status = {c["id"]: c["status"] for c in json.loads(summary.read_text())["checks"]}
    for check in ("driver.nvidia_smi", "driver.version", "gpu.count", "gpu.model", "gpu.ecc_volatile", "gpu.xid"):
        assert status[check] == "passed", (check, status)
