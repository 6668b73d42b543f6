"""A sweep of a Slurm partition: one batch job, one step task per node running ``validate this-node``, whose node
verdicts become one gpuready run (the same summary.json, JUnit, report and metrics as ``validate gpu-node``).

As the field's sweeps do (Azure's distributed_nhc.sb.sh, AWS's sbatch health checks): the nodes check themselves
in parallel, and what Slurm cannot schedule is said per node instead of waited for. The verdicts are written
to a folder every node can write (the run folder, on a shared file system); each wait has a bound.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuready.core.errors import BadInput, Unreachable, shorten
from gpuready.core.results import Check, errored, skipped
from gpuready.validate.node import node_verdict

log = logging.getLogger(__name__)

SWEEP_ID = "slurm.sweep"
#: Job states after which nothing more will be written (squeue(1), JOB STATE CODES).
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL")
CALL_TIMEOUT = 30.0


@dataclass(frozen=True)
class PartitionNode:
    name: str
    #: sinfo's compact state: idle, mix, alloc, drain, drng, down...
    state: str

    @property
    def usable(self) -> bool:
        return self.state.rstrip("*~#!%$@^-") in ("idle", "mix", "alloc", "comp")


def _slurm(tool: str, *args: str, timeout: float = CALL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    path = shutil.which(tool)
    if path is None:
        raise Unreachable(f"{tool} is not on PATH: cannot submit the sweep (install slurm-client)")
    try:
        return subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise Unreachable(f"{tool} {' '.join(args[:2])} did not answer within {timeout:.0f}s") from None


def partition_nodes(partition: str) -> list[PartitionNode]:
    done = _slurm("sinfo", "-h", "-N", "-p", partition, "-o", "%N %t")
    if done.returncode != 0:
        raise Unreachable(f"sinfo -p {partition} failed: {shorten(done.stderr or done.stdout, 200)}")
    nodes = {}
    for line in done.stdout.splitlines():
        name, _, state = line.strip().partition(" ")
        if name:
            nodes[name] = PartitionNode(name, state.strip())
    if not nodes:
        raise BadInput(f"--partition {partition}: no such partition, or it has no nodes (sinfo -p {partition})")
    return list(nodes.values())


def step_command(gpuready: str, folder: Path, node_args: list[str]) -> str:
    """What each task runs: this-node, its verdict named after the node Slurm runs it on (SLURMD_NODENAME). The
    verdict says how the node did; gpuready's own exit codes (0-3) leave the task successful, so the job ends
    COMPLETED and only a crash or a signal fails it."""
    verdict = shlex.quote(str(folder)) + '/"$SLURMD_NODENAME".json'
    return f"{gpuready} validate this-node {shlex.join(node_args)} --verdict {verdict} || [ $? -le 3 ]"


def submit(partition: str, nodes: list[str], command: str, folder: Path, time_limit_min: int) -> str:
    script = folder / "sweep.sh"
    script.write_text(
        "#!/bin/sh\n# gpuready slurm sweep: one task per node, each writing its node verdict\n"
        f"exec srun --ntasks-per-node=1 --kill-on-bad-exit=0 sh -c {shlex.quote(command)}\n"
    )
    done = _slurm(
        "sbatch",
        "--parsable",
        "--partition",
        partition,
        "--nodelist",
        ",".join(nodes),
        f"--nodes={len(nodes)}",
        "--ntasks-per-node=1",
        f"--time={time_limit_min}",
        "--job-name=gpuready-sweep",
        f"--output={folder / 'sweep-%j.out'}",
        str(script),
    )
    if done.returncode != 0:
        raise BadInput(f"sbatch refused the sweep: {shorten(done.stderr or done.stdout, 300)}")
    return done.stdout.strip().split(";")[0]


#: A job whose prolog failed on a node goes back to the queue, held (slurm.conf(5), "Prolog and Epilog Scripts"):
#: it will not run again by itself, so the sweep stops waiting for it.
HELD = "launch_failed_requeued_held"


def job_state(job: str) -> str:
    """JobState, with ``HELD`` when Slurm requeued the job held."""
    done = _slurm("scontrol", "show", "job", job)
    fields = dict(t.split("=", 1) for t in done.stdout.split() if "=" in t)
    state = fields.get("JobState", "")
    return f"{state} {HELD}" if fields.get("Reason") == HELD else state


def wait(job: str, timeout: float, poll: float = 1.0, on_state: Callable[[str], None] | None = None) -> str:
    """The job's final state, or after ``timeout`` seconds the job cancelled and the state it had."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        now = job_state(job)
        if now != state and on_state is not None:
            on_state(now)
        state = now
        if state in FINISHED:
            return state
        if state.endswith(HELD):
            _slurm("scancel", job)
            return "requeued held (a node's prolog failed) and cancelled"
        time.sleep(poll)
    _slurm("scancel", job)
    return f"{state or 'UNKNOWN'} (cancelled after {timeout:.0f}s)"


def collect(folder: Path, nodes: list[PartitionNode], usable: list[str], job_state_text: str) -> list[Check]:
    """Every node's checks: from its verdict, or one check saying why there is none."""
    checks: list[Check] = []
    for node in nodes:
        if node.name not in usable:
            checks.append(skipped(SWEEP_ID, node.name, f"not swept: Slurm has it {node.state}"))
            continue
        path = folder / f"{node.name}.json"
        if not path.exists():
            drained = _drain_reason(node.name)
            checks.append(
                errored(
                    SWEEP_ID,
                    node.name,
                    f"no node verdict: the sweep job was {job_state_text} before this node wrote one"
                    + (f"; Slurm drained it: {drained}" if drained else ""),
                )
            )
            continue
        data = node_verdict.read(path)
        if data["host"] != node.name:
            raise BadInput(f"{path}: the verdict of {data['host']!r}, written for node {node.name}")
        checks.extend(node_verdict.checks(data))
    return checks


def _drain_reason(name: str) -> str:
    from gpuready.validate import slurm

    try:
        node = slurm.show_node(name)
    except (BadInput, Unreachable):
        return ""
    return node.reason if node.drained else ""


def default_gpuready() -> str:
    """The command that runs this gpuready on the nodes: this Python, assumed at the same path there."""
    import sys

    return shlex.join([sys.executable, "-m", "gpuready.core.cli"]) if os.path.isabs(sys.executable) else "gpuready"
