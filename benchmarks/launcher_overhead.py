"""Launcher overhead: seconds from `gpuready validate training` starting to the workers' first training
step, for the local, ssh (horovodrun and mpirun) and slurm launchers, measured in one run.

The Slurm lab (slurmctld + one slurmd per namespace host, from Debian's packages) is started for the
run and stopped after it; the ssh launchers use the same two hosts. Every launcher runs the same tiny
2-worker plan. The floor is the local launcher (horovodrun on this machine): what is above it is
the launcher's own cost (ssh sessions, sbatch, slurmctld scheduling, srun, the rendezvous).

With ``--framework pytorch`` the same for the PyTorch path: torchrun here (local, the floor), one
torchrun per host over ssh, and ``srun torchrun`` under Slurm.

Usage (root): .venv/bin/python benchmarks/launcher_overhead.py [--repeat 1] [--framework tensorflow|pytorch]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import training_sizes as sizes  # noqa: E402

TINY = ["--gpus", "2", *sizes.TINY]


def gpuready(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuready.core.cli", *args], capture_output=True, text=True, check=False
    )


def overhead(label: str, args: list[str], artifacts: Path, framework: str) -> dict[str, float]:
    folder = artifacts / label
    folder.mkdir()
    start = time.time()
    # PyTorch: one thread per worker everywhere (local puts both workers on this host, ssh and slurm one per host)
    threads = ["--cpu-threads", "1"] if framework == "pytorch" else []
    proc = gpuready(
        "validate", "training", *args, *TINY, *threads, "--framework", framework, "--artifacts", str(folder)
    )
    if proc.returncode:
        sys.exit(f"{label}: run failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    (run,) = list(folder.iterdir())
    ranks = json.loads((run / "step_times.json").read_text())["2"]
    # the first step is a collective: it starts for the job when the last worker reaches it
    return {
        "first_step_s": max(r["first_step_unix"] for r in ranks) - start,
        "interpreters_started_s": max(r["process_start_unix"] for r in ranks) - start,
        "total_s": time.time() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--framework", choices=["tensorflow", "pytorch"], default="tensorflow")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the lab's network namespaces)")
    artifacts = Path(tempfile.mkdtemp(prefix="gpuready-bench-launchers-"))
    lab_dir = artifacts / "lab"
    up = gpuready("lab", "up", "--components", "slurm", "--lab-dir", str(lab_dir))
    if up.returncode:
        sys.exit(f"lab up failed: {up.stderr.strip()}")
    inventory = up.stdout.strip().splitlines()[-1]
    launchers = {
        "local": ["--launcher", "local"],
        "ssh horovodrun": ["-i", inventory, "--launcher", "ssh", "--ssh-runner", "horovodrun"],
        "ssh mpirun": ["-i", inventory, "--launcher", "ssh", "--ssh-runner", "mpirun"],
        "slurm": ["-i", inventory, "--launcher", "slurm"],
    }
    if args.framework == "pytorch":  # torchrun is the runner of every launcher
        launchers = {
            "local": ["--launcher", "local"],
            "ssh torchrun": ["-i", inventory, "--launcher", "ssh"],
            "slurm (srun torchrun)": ["-i", inventory, "--launcher", "slurm"],
        }
    results: dict[str, list[dict[str, float]]] = {k: [] for k in launchers}
    try:
        for i in range(args.repeat):
            for label, extra in launchers.items():
                name = "".join(c if c.isalnum() else "-" for c in label)
                results[label].append(overhead(f"{name}-{i}", extra, artifacts, args.framework))
    finally:
        gpuready("lab", "down", "--lab-dir", str(lab_dir))
    floor = statistics.median(r["first_step_s"] for r in results["local"])
    print(
        f"{args.framework}, 2 workers, resnet50 32px batch 4, {args.repeat} run(s) each (median); {os.cpu_count()} CPUs"
    )
    print("| launcher | workers' interpreters up (s) | first training step (s) | above local (s) | whole command (s) |")
    print("|---|---:|---:|---:|---:|")
    for label, runs in results.items():
        first = statistics.median(r["first_step_s"] for r in runs)
        print(
            f"| {label} | {statistics.median(r['interpreters_started_s'] for r in runs):.1f} | {first:.1f} | "
            f"{first - floor:+.1f} | {statistics.median(r['total_s'] for r in runs):.1f} |"
        )
    print(f"artifacts: {artifacts}")


if __name__ == "__main__":
    main()
