"""Local launcher: N worker processes on this machine (Horovod over Gloo, MultiWorkerMirroredStrategy, or
PyTorch DDP under torchrun)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from gpuready.workloads.launchers import (
    TRAIN_MODULE,
    Launch,
    Plan,
    horovodrun,
    require_local_training,
    worker_env,
)

log = logging.getLogger(__name__)


def command(plan: Plan, workers: int) -> list[str]:
    if plan.framework == "pytorch":
        # torchrun even for 1 worker: the same environment (RANK, MASTER_ADDR...) at every size
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(workers),
            *plan.module,
            *plan.train_args(),
        ]
    train = [sys.executable, *TRAIN_MODULE, *plan.train_args()]
    if workers == 1:
        return train  # hvd.init() without a launcher is a 1-worker job
    return [horovodrun(), "-np", str(workers), "-H", f"localhost:{workers}", "--gloo", *train]


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _run_group(cmd: list[str], log_path: Path, timeout_s: int) -> int:
    """Run a launcher (torchrun) in its own process group, so a timeout or Ctrl-C stops its workers too."""
    with log_path.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=worker_env(), start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def launch(plan: Plan, workers: int, folder: Path) -> Launch:
    require_local_training(plan.distribution, plan.framework)
    log_path = folder / f"workers-{workers}.log"
    result = Launch(workers, log=log_path)
    try:
        if plan.framework == "pytorch":
            result.returncode = _run_group(command(plan, workers), log_path, plan.timeout_s)
        elif plan.distribution == "horovod":
            with log_path.open("w") as out:
                proc = subprocess.run(
                    command(plan, workers),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=worker_env(),
                    timeout=plan.timeout_s,
                    check=False,
                )
            result.returncode = proc.returncode
        else:
            result.returncode = _mwms(plan, workers, log_path)
    except subprocess.TimeoutExpired:
        result.problem = f"stopped after {plan.timeout_s}s (timeout_s)"
    return result.collect()


def _mwms(plan: Plan, workers: int, log_path: Path) -> int:
    """One process per worker with its TF_CONFIG; the log holds them all, one after the other."""
    ports = _free_ports(workers)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    logs = [log_path.with_suffix(f".{i}.log") for i in range(workers)]
    procs = []
    for i in range(workers):
        env = {
            **worker_env(),
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
            "GPUREADY_LOCAL_RANK": str(i),
            "GPUREADY_LOCAL_SIZE": str(workers),
        }
        with logs[i].open("w") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, *TRAIN_MODULE, *plan.train_args()], stdout=out, stderr=subprocess.STDOUT, env=env
                )
            )
    try:
        return max((p.wait(timeout=plan.timeout_s) for p in procs), key=abs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        log_path.write_text("".join(part.read_text(errors="replace") for part in logs))
        for part in logs:
            part.unlink()
