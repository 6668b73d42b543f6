"""SSH launcher: horovodrun (Gloo) or mpirun across the inventory's GPU hosts, from this machine.

Uses the password-less SSH the mpi_ssh role sets up; every host must have this Python (same path)
with gpuready[train] installed, as horovodrun and mpirun expect.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuready.core.errors import BadInput, Unreachable
from gpuready.workloads.launchers import TRAIN_MODULE, Launch, Plan, worker_env


def host_slots(hosts: list[tuple[str, int]], workers: int) -> list[tuple[str, int]]:
    """Fill whole hosts first, one worker per GPU: the fewest hosts, so the most traffic stays on NVLink."""
    chosen, left = [], workers
    for address, gpus in hosts:
        if left <= 0:
            break
        take = min(gpus, left)
        if take:
            chosen.append((address, take))
            left -= take
    if left > 0:
        total = sum(g for _, g in hosts)
        raise BadInput(f"{workers} workers need {workers} GPUs; the inventory's hosts have {total}")
    return chosen


def command(plan: Plan, workers: int, hosts: list[tuple[str, int]], runner: str, python: str = "") -> list[str]:
    slots = ",".join(f"{h}:{n}" for h, n in host_slots(hosts, workers))
    train = [python or sys.executable, *TRAIN_MODULE, *plan.train_args()]
    if runner == "mpirun":
        # seed 004: --map-by socket gave the best binding on the C4140; -x passes the environment on
        return ["mpirun", "--map-by", "socket", "-np", str(workers), "-H", slots, "-bind-to", "none",
                "-x", "PATH", "-x", "LD_LIBRARY_PATH", "-x", "NCCL_DEBUG=WARN", "-x", "TF_CPP_MIN_LOG_LEVEL=1", *train]
    return ["horovodrun", "-np", str(workers), "-H", slots, "--gloo", *train]


def launch(plan: Plan, workers: int, folder: Path, hosts: list[tuple[str, int]], runner: str) -> Launch:
    cmd = command(plan, workers, hosts, runner)
    log_path = folder / f"workers-{workers}.log"
    result = Launch(workers, log=log_path)
    (folder / f"workers-{workers}.cmd").write_text(" ".join(cmd) + "\n")
    try:
        with log_path.open("w") as out:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=worker_env(),
                                  timeout=plan.timeout_s, check=False)
        result.returncode = proc.returncode
    except FileNotFoundError as e:
        raise Unreachable(f"{cmd[0]} not found on this machine: install it, or use --launcher slurm") from e
    except subprocess.TimeoutExpired:
        result.problem = f"stopped after {plan.timeout_s}s (timeout_s)"
    return result.collect()
