"""SSH launcher: horovodrun (Gloo) or mpirun across the inventory's GPU hosts, from this machine; for
PyTorch, one torchrun per host over ssh, meeting at the first host (c10d rendezvous).

Uses the password-less SSH the mpi_ssh role sets up; every host must have this Python (same path)
with gpuready[train] installed, as horovodrun and mpirun expect.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from gpuready.core.errors import BadInput, Unreachable
from gpuready.workloads.launchers import RENDEZVOUS_PORT, TRAIN_MODULE, Launch, Plan, torchrun_args, worker_env


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


#: ssh without prompts: a host that is not set up fails at once instead of waiting for a password
SSH = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]


def torchrun_commands(plan: Plan, workers: int, hosts: list[tuple[str, int]], python: str = "") -> list[list[str]]:
    """One ssh command per host: torchrun with that host's workers, all meeting at the first host."""
    slots = host_slots(hosts, workers)
    if len({n for _, n in slots}) > 1:
        raise BadInput(f"{workers} workers land on hosts as {[n for _, n in slots]}: torchrun wants the same "
                       "number of workers on every host (choose a multiple of the GPUs per host)")
    endpoint, per_node = f"{slots[0][0]}:{RENDEZVOUS_PORT}", slots[0][1]
    train = [python or sys.executable, "-m", "torch.distributed.run",
             *torchrun_args(len(slots), per_node, endpoint, f"gpuready-{workers}w"), *plan.module, *plan.train_args()]
    return [[*SSH, address, shlex.join(train)] for address, _ in slots]


def launch(plan: Plan, workers: int, folder: Path, hosts: list[tuple[str, int]], runner: str) -> Launch:
    if plan.framework == "pytorch":
        return _launch_torchrun(plan, workers, folder, hosts)
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


def _launch_torchrun(plan: Plan, workers: int, folder: Path, hosts: list[tuple[str, int]]) -> Launch:
    commands = torchrun_commands(plan, workers, hosts)
    log_path = folder / f"workers-{workers}.log"
    (folder / f"workers-{workers}.cmd").write_text("".join(shlex.join(c) + "\n" for c in commands))
    parts = [log_path.with_suffix(f".{i}.log") for i in range(len(commands))]
    procs = []
    try:
        for cmd, part in zip(commands, parts, strict=True):
            with part.open("w") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=worker_env()))
        codes = [p.wait(timeout=plan.timeout_s) for p in procs]
    except FileNotFoundError as e:
        raise Unreachable("ssh not found on this machine: install openssh-client, or use --launcher slurm") from e
    except subprocess.TimeoutExpired:
        codes = []
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        log_path.write_text("".join(p.read_text(errors="replace") for p in parts if p.exists()))
        for p in parts:
            p.unlink(missing_ok=True)
    result = Launch(workers, log=log_path, returncode=max(codes, key=abs) if codes else None)
    if not codes:
        result.problem = f"stopped after {plan.timeout_s}s (timeout_s)"
    return result.collect()
