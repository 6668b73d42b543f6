"""Slurm launcher: an sbatch script per size; submitted with ``sbatch --wait`` when sbatch exists here,
otherwise written out for the user to submit on the cluster's login node (and read back with
``gpuready report collect``).

In the script, srun starts one task per GPU and ``gpuready.workloads.launchers.rendezvous`` serves them
Horovod's Gloo rendezvous, so the Gloo-only Horovod that `make` builds trains under Slurm; the
script shows Dell's CheXNet tuning article's ``mpirun --map-by socket`` line for a Horovod built with MPI.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gpuready.core.errors import BadInput
from gpuready.workloads.launchers import (
    RENDEZVOUS_PORT,
    TRAIN_MODULE,
    Launch,
    Plan,
    parse_results,
    rendezvous,
    torchrun_args,
)

#: sbatch long options the script may use (from `man sbatch`); anything else is a typo.
KNOWN_OPTIONS = {
    "job-name",
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "gres",
    "gpus-per-node",
    "cpus-per-task",
    "time",
    "output",
    "partition",
    "exclusive",
}
_DIRECTIVE = re.compile(r"^#SBATCH\s+--([a-z-]+)(?:=(\S+))?\s*$")
#: pending reasons that no amount of waiting fixes (squeue(1), JOB REASON CODES)
HOPELESS = (
    "ReqNodeNotAvail",
    "PartitionNodeLimit",
    "PartitionDown",
    "PartitionInactive",
    "BadConstraints",
    "NodeDown",
    "InvalidQOS",
    "Nodes_required_for_job_are_DOWN",
)
#: how long a job may stay pending for one of those reasons before it is cancelled (a drained node
#: may be resumed by its admin meanwhile)
HOPELESS_GRACE_S = 15
#: what sbatch says when this machine knows no Slurm cluster: no slurm.conf, no SLURM_CONF and no
#: configless DNS SRV record (slurm's src/common/read_config.c); the client is installed, the cluster elsewhere
NO_CLUSTER = "Could not establish a configuration source"


def script(
    plan: Plan,
    workers: int,
    gpus_per_node: int,
    folder: Path,
    partition: str = "",
    python: str = "",
    tasks_per_node: int = 0,
) -> str:
    per_node = min(workers, tasks_per_node or max(1, gpus_per_node))
    nodes = math.ceil(workers / per_node)
    minutes = max(1, math.ceil(plan.timeout_s / 60))
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=gpuready-{plan.model}-{workers}w",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks={workers}",
        f"#SBATCH --ntasks-per-node={per_node}",
    ]
    if gpus_per_node:
        lines.append(f"#SBATCH --gres=gpu:{per_node}")
    lines += [f"#SBATCH --time={minutes}", "#SBATCH --exclusive", f"#SBATCH --output={folder}/slurm-{workers}w-%j.out"]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if plan.framework == "pytorch":
        return "\n".join(lines + _torchrun_lines(plan, per_node, python))
    py = python or sys.executable
    train = shlex.join([py, *TRAIN_MODULE, *plan.train_args()])
    lines += [
        "set -euo pipefail",
        "export TF_CPP_MIN_LOG_LEVEL=1 PYTHONUNBUFFERED=1",
        "# One task per GPU. srun starts the tasks; gpuready.workloads.launchers.rendezvous serves them Horovod's Gloo",
        "# rendezvous from this first node (what horovodrun --gloo does over ssh), which needs no MPI in",
        "# Horovod. With a Horovod built with MPI, the Dell tuning article's line does the same (--map-by socket binds",
        "# best on the C4140):",
        f'#   mpirun --map-by socket -np "$SLURM_NTASKS" -bind-to none {train}',
        f"{shlex.quote(py)} -m {rendezvous.MODULE} srun -- {train}",
        "",
    ]
    return "\n".join(lines)


def _torchrun_lines(plan: Plan, per_node: int, python: str) -> list[str]:
    """One torchrun per node (srun), each starting one worker per GPU; they meet at the first node."""
    rdzv = torchrun_args(0, per_node, "RDZV", "JOB")
    rdzv[1], rdzv[rdzv.index("RDZV")], rdzv[rdzv.index("JOB")] = (
        '"$SLURM_NNODES"',
        f'"$head:{RENDEZVOUS_PORT}"',
        '"gpuready-$SLURM_JOB_ID"',
    )
    torchrun = " ".join(
        [
            shlex.quote(python or sys.executable),
            "-m",
            "torch.distributed.run",
            *rdzv,
            shlex.join([*plan.module, *plan.train_args()]),
        ]
    )
    return [
        "set -euo pipefail",
        "export PYTHONUNBUFFERED=1",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "# one torchrun per node, one worker per GPU (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE)",
        f'srun --nodes="$SLURM_NNODES" --ntasks="$SLURM_NNODES" --ntasks-per-node=1 {torchrun}',
        "",
    ]


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


def _env(slurm_conf: str) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": slurm_conf} if slurm_conf else dict(os.environ)


def job_fields(job: str, env: dict[str, str]) -> dict[str, str]:
    """The job's state, exit code and reason: from sacct where accounting is kept, else from slurmctld."""
    done = subprocess.run(
        ["sacct", "-j", job, "-X", "-n", "-P", "-o", "State,ExitCode,Reason"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=30,
    )
    line = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else ""
    if line:
        state, exit_code, reason = ([*line.split("|"), "", ""])[:3]
        return {"JobState": state, "ExitCode": exit_code, "Reason": reason, "source": "sacct"}
    shown = subprocess.run(
        ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, env=env, check=False, timeout=30
    )
    fields = dict(f.split("=", 1) for f in shown.stdout.split() if "=" in f)
    # sacct says why it had nothing (no accounting storage): the user should know where the state came from
    return {**fields, "source": "scontrol (sacct: " + (" ".join(done.stderr.split()) or "no record") + ")"}


def describe(job: str, env: dict[str, str]) -> str:
    f = job_fields(job, env)
    state = f.get("JobState", "unknown")
    extra = [f"exit code {f['ExitCode']}"] if f.get("ExitCode") not in (None, "", "0:0") else []
    if f.get("Reason") not in (None, "", "None"):
        extra.append(f"reason {f['Reason']}")
    return f"state {state}" + (f" ({', '.join(extra)})" if extra else "") + f" from {f['source']}"


def job_tail(text: str) -> str:
    """The workers' last words, then Slurm's first complaint: srun's own lines come last and name no cause."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "GPUREADY_RESULT" not in ln]
    slurm = [ln for ln in lines if ln.startswith(("srun:", "slurmstepd"))]
    workers = [ln for ln in lines if ln not in slurm]
    return " | ".join(workers[-2:] + slurm[:1])


def _wait(proc: subprocess.Popen[str], job: str, env: dict[str, str], limit_s: float) -> str:
    """Wait for `sbatch --wait`; cancel a job that cannot start (drained nodes) or runs past the limit."""
    deadline, hopeless_since = time.monotonic() + limit_s, None
    while proc.poll() is None:
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job], env=env, capture_output=True, check=False)
            proc.wait()
            return f"not finished after {limit_s:.0f}s, cancelled"
        fields = job_fields(job, env) if job else {}
        if fields.get("JobState") == "PENDING" and any(r in fields.get("Reason", "") for r in HOPELESS):
            hopeless_since = hopeless_since or time.monotonic()
            if time.monotonic() - hopeless_since > HOPELESS_GRACE_S:
                why = fields["Reason"]
                subprocess.run(["scancel", job], env=env, capture_output=True, check=False)
                proc.wait()
                return f"could not start ({why}), cancelled"
        else:
            hopeless_since = None
        time.sleep(2)
    return ""


def launch(
    plan: Plan,
    workers: int,
    folder: Path,
    gpus_per_node: int,
    partition: str = "",
    slurm_conf: str = "",
    tasks_per_node: int = 0,
) -> Launch:
    if plan.framework != "pytorch" and plan.distribution != "horovod":
        raise BadInput(
            f"--launcher slurm runs Horovod (srun, or mpirun with an MPI build) or PyTorch (srun torchrun), "
            f"not {plan.distribution}"
        )
    path = folder / f"train-{workers}w.sbatch"
    text = script(plan, workers, gpus_per_node, folder, partition, tasks_per_node=tasks_per_node)
    path.write_text(text)
    path.chmod(0o755)
    problems = validate(text)
    if problems:
        return Launch(workers, problem="; ".join(problems))
    sbatch = shutil.which("sbatch")
    if not sbatch:
        return Launch(
            workers,
            written_only=f"{path.name} written, not submitted (no sbatch here): "
            "run `sbatch` on it on the cluster, then `gpuready report collect`",
        )
    env = _env(slurm_conf)
    proc = subprocess.Popen(
        [sbatch, "--parsable", "--wait", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    job = proc.stdout.readline().strip().split(";")[0]  # --parsable prints the id at submission
    try:
        stopped = _wait(proc, job, env, plan.timeout_s + 600)  # queueing time on top of the run
    except BaseException:
        # Ctrl-C, SIGTERM or an error here: the job would otherwise keep running on the cluster
        if job:
            subprocess.run(["scancel", job], env=env, capture_output=True, check=False)
        proc.kill()
        proc.wait()
        raise
    errors = " ".join(proc.stderr.read().split())
    if not job and NO_CLUSTER in errors:
        return Launch(
            workers,
            written_only=f"{path.name} written, not submitted (sbatch is here but no Slurm cluster "
            f"is configured: {NO_CLUSTER.lower()}; set training.slurm_conf, or run "
            "`sbatch` on it on the cluster, then `gpuready report collect`)",
        )
    if not job:
        return Launch(workers, problem=f"sbatch refused {path.name}: {errors or f'exit {proc.returncode}'}")
    log_path = folder / f"slurm-{workers}w-{job}.out"
    out = log_path.read_text(errors="replace") if log_path.exists() else ""
    result = Launch(workers, parse_results(out), log_path if log_path.exists() else None, proc.returncode)
    if stopped or proc.returncode or len(result.results) != workers:
        result.problem = (
            f"job {job} {stopped + ', ' if stopped else ''}{describe(job, env)}, "
            f"{len(result.results)}/{workers} workers reported: {job_tail(out) or errors or 'no output'}"
        )
    return result
