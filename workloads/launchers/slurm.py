"""Slurm launcher: an sbatch script per size; submitted (and waited for) when sbatch exists here,
otherwise written out for the user to submit on the cluster's login node."""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from gpuready.workloads.launchers import (
    RENDEZVOUS_PORT,
    TRAIN_MODULE,
    Launch,
    Plan,
    parse_results,
    tail,
    torchrun_args,
)

#: sbatch long options the script may use (from `man sbatch`); anything else is a typo.
KNOWN_OPTIONS = {"job-name", "nodes", "ntasks", "ntasks-per-node", "gres", "gpus-per-node", "cpus-per-task",
                 "time", "output", "partition", "exclusive"}
_DIRECTIVE = re.compile(r"^#SBATCH\s+--([a-z-]+)(?:=(\S+))?\s*$")


def script(plan: Plan, workers: int, gpus_per_node: int, folder: Path, partition: str = "",
           python: str = "") -> str:
    per_node = min(workers, max(1, gpus_per_node))
    nodes = math.ceil(workers / per_node)
    minutes = max(1, math.ceil(plan.timeout_s / 60))
    lines = ["#!/bin/bash", f"#SBATCH --job-name=gpuready-{plan.model}-{workers}w", f"#SBATCH --nodes={nodes}",
             f"#SBATCH --ntasks={workers}", f"#SBATCH --ntasks-per-node={per_node}"]
    if gpus_per_node:
        lines.append(f"#SBATCH --gres=gpu:{per_node}")
    lines += [f"#SBATCH --time={minutes}", "#SBATCH --exclusive", f"#SBATCH --output={folder}/slurm-{workers}w-%j.out"]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if plan.framework == "pytorch":
        return "\n".join(lines + _torchrun_lines(plan, per_node, python))
    train = shlex.join([python or sys.executable, *TRAIN_MODULE, *plan.train_args()])
    lines += ["set -euo pipefail", "export TF_CPP_MIN_LOG_LEVEL=1",
              "# one process per GPU; seed 004: --map-by socket binds best on the C4140",
              f"mpirun --map-by socket -np \"$SLURM_NTASKS\" -bind-to none {train}", ""]
    return "\n".join(lines)


def _torchrun_lines(plan: Plan, per_node: int, python: str) -> list[str]:
    """One torchrun per node (srun), each starting one worker per GPU; they meet at the first node."""
    rdzv = torchrun_args(0, per_node, "RDZV", "JOB")
    rdzv[1], rdzv[rdzv.index("RDZV")], rdzv[rdzv.index("JOB")] = \
        '"$SLURM_NNODES"', f'"$head:{RENDEZVOUS_PORT}"', '"gpuready-$SLURM_JOB_ID"'
    torchrun = " ".join([shlex.quote(python or sys.executable), "-m", "torch.distributed.run", *rdzv,
                         shlex.join([*plan.module, *plan.train_args()])])
    return ["set -euo pipefail",
            'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "# one torchrun per node, one worker per GPU (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE)",
            f'srun --nodes="$SLURM_NNODES" --ntasks="$SLURM_NNODES" --ntasks-per-node=1 {torchrun}', ""]


def validate(text: str) -> list[str]:
    """Problems with a generated script: shell syntax, unknown or inconsistent #SBATCH directives."""
    problems = []
    bash = shutil.which("bash") or "/bin/bash"
    syntax = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, check=False)
    if syntax.returncode:
        problems.append(f"bash -n: {syntax.stderr.strip()}")
    options: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH"):
            match = _DIRECTIVE.match(line)
            if not match or match.group(1) not in KNOWN_OPTIONS:
                problems.append(f"unknown directive: {line}")
            else:
                options[match.group(1)] = match.group(2) or ""
    try:
        nodes, tasks, per_node = int(options["nodes"]), int(options["ntasks"]), int(options["ntasks-per-node"])
        if not (nodes - 1) * per_node < tasks <= nodes * per_node:
            problems.append(f"{tasks} tasks do not fill {nodes} nodes of {per_node}")
        if "gres" in options and options["gres"] != f"gpu:{per_node}":
            problems.append(f"--gres={options['gres']} but {per_node} tasks per node: one task per GPU")
    except (KeyError, ValueError) as e:
        problems.append(f"missing or bad --nodes/--ntasks/--ntasks-per-node: {e}")
    return problems


def launch(plan: Plan, workers: int, folder: Path, gpus_per_node: int, partition: str = "") -> Launch:
    path = folder / f"train-{workers}w.sbatch"
    text = script(plan, workers, gpus_per_node, folder, partition)
    path.write_text(text)
    path.chmod(0o755)
    problems = validate(text)
    if problems:
        return Launch(workers, problem="; ".join(problems))
    sbatch = shutil.which("sbatch")
    if not sbatch:
        return Launch(workers, written_only=f"{path.name} written, not submitted (no sbatch here): "
                                            "run `sbatch` on it on the cluster")
    try:
        proc = subprocess.run([sbatch, "--parsable", "--wait", str(path)], capture_output=True, text=True,
                              timeout=plan.timeout_s + 600, check=False)  # queueing time on top of the run
    except subprocess.TimeoutExpired:
        return Launch(workers, problem=f"job not finished after {plan.timeout_s + 600}s")
    job = proc.stdout.strip().split(";")[0]
    log_path = folder / f"slurm-{workers}w-{job}.out"
    text = log_path.read_text(errors="replace") if log_path.exists() else proc.stdout + proc.stderr
    result = Launch(workers, parse_results(text), log_path, proc.returncode)
    if proc.returncode or len(result.results) != workers:
        result.problem = f"job {job} exit {proc.returncode}, {len(result.results)}/{workers} reported: {tail(text)}"
    return result
