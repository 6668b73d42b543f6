"""Horovod's Gloo rendezvous for workers started by srun or mpirun instead of horovodrun.

``horovodrun --gloo`` does two things: it starts one process per slot over ssh, and it serves an
HTTP rendezvous that tells each process its rank and where its peers are (``HOROVOD_*``
variables). Under Slurm the processes come from ``srun``, under OpenMPI from ``mpirun``; this
module does the second half for them, so a Horovod built with Gloo only (no MPI) trains under
either launcher exactly as under horovodrun:

    python -m gpuready.workloads.launchers.rendezvous srun -- python -m gpuready.workloads.tensorflow.train ...
        (in a batch script: serves the rendezvous, then ``srun`` runs one worker per task)
    python -m gpuready.workloads.launchers.rendezvous worker -- python -m gpuready.workloads.tensorflow.train ...
        (what each task runs: its slot from the launcher's rank variables, then exec)
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
from typing import Any

#: variables a worker needs from whoever serves the rendezvous
MODULE = "gpuready.workloads.launchers.rendezvous"
ADDR, PORT, HOSTS = "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT", "GPUREADY_GLOO_HOSTS"
#: (rank, local rank) variables of the launchers we know, in order of preference
RANK_VARIABLES = (
    ("SLURM_PROCID", "SLURM_LOCALID"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMI_RANK", "MPI_LOCALRANKID"),
)


def slurm_hosts(nodelist: str, tasks_per_node: str) -> str:
    """``h1:2,h2:2`` from Slurm's SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE (``2(x2)``, ``3,2``)."""
    names = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
    ).stdout.split()
    counts = task_counts(tasks_per_node)
    if len(counts) != len(names):
        raise ValueError(f"{len(names)} nodes ({nodelist}) but tasks per node {tasks_per_node!r}")
    return ",".join(f"{n}:{c}" for n, c in zip(names, counts, strict=True))


def task_counts(tasks_per_node: str) -> list[int]:
    """Slurm's compressed tasks per node, ``2(x3),1``, as one count per node: [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            raise ValueError(f"cannot read tasks per node {tasks_per_node!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def plan(hosts: str) -> list[Any]:
    """Horovod's own slot assignment (as horovodrun makes it) for ``h1:2,h2:2``: ranks fill hosts in order."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts

    items = parse_hosts(hosts)
    assignments: list[Any] = get_host_assignments(items, sum(h.slots for h in items))
    return assignments


def route_address(peer: str) -> str:
    """This machine's address on the route to ``peer`` (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((peer, 9))
        return str(s.getsockname()[0])


def interface_of(address: str) -> str:
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == address for a in addresses):
            return str(name)
    raise ValueError(f"no network interface holds {address}")


class Rendezvous:
    """Horovod's rendezvous HTTP server for one job, with the variables its workers need."""

    def __init__(self, hosts: str, address: str) -> None:
        from horovod.runner.http.http_server import RendezvousServer

        self.server = RendezvousServer()
        port = self.server.start()
        self.server.init(plan(hosts))
        self.env = {ADDR: address, PORT: str(port), HOSTS: hosts}

    def __enter__(self) -> Rendezvous:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def worker_env(environ: dict[str, str]) -> dict[str, str]:
    """The HOROVOD_* variables of this process's slot, from the launcher's rank variables."""
    for rank_name, local_name in RANK_VARIABLES:
        if rank_name in environ:
            rank, local = int(environ[rank_name]), int(environ.get(local_name, "-1"))
            break
    else:
        raise ValueError(
            f"no rank variable ({', '.join(r for r, _ in RANK_VARIABLES)}): start this under srun or mpirun"
        )
    slots = plan(environ[HOSTS])
    if rank >= len(slots):
        raise ValueError(f"rank {rank} but {environ[HOSTS]} has {len(slots)} slots")
    slot = slots[rank]
    if local >= 0 and local != slot.local_rank:
        raise ValueError(
            f"rank {rank} is local rank {local} here, but local rank {slot.local_rank} on "
            f"{slot.hostname} in {environ[HOSTS]}: use block placement (srun's default, mpirun "
            "--map-by slot or socket with whole hosts)"
        )
    iface = interface_of(route_address(environ[ADDR]))
    return {
        "HOROVOD_HOSTNAME": slot.hostname,
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": iface,
    }


def _srun(command: list[str], srun_args: list[str]) -> int:
    env = os.environ
    hosts = slurm_hosts(env.get("SLURM_JOB_NODELIST", ""), env.get("SLURM_TASKS_PER_NODE", ""))
    # the batch step runs on the allocation's first node; the others reach it at its NodeAddr
    with Rendezvous(hosts, _node_address(plan(hosts)[0].hostname)) as rdv:
        argv = ["srun", "--kill-on-bad-exit=1", *srun_args, sys.executable, "-m", MODULE, "worker", "--", *command]
        return subprocess.run(argv, env={**env, **rdv.env}, check=False).returncode


def _node_address(node: str) -> str:
    """The address Slurm reaches ``node`` at (its NodeAddr), which the other nodes reach too."""
    out = subprocess.run(["scontrol", "show", "node", node, "-o"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"\bNodeAddr=(\S+)", out)
    return socket.gethostbyname(match.group(1) if match else node)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpuready.workloads.launchers.rendezvous",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("mode", choices=("srun", "worker"))
    p.add_argument("--srun-arg", action="append", default=[], help="passed on to srun (srun mode)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the command to run after --")
    try:
        if args.mode == "srun":
            return _srun(command, args.srun_arg)
        env = {**os.environ, **worker_env(dict(os.environ))}
    except (ValueError, OSError, subprocess.CalledProcessError) as e:
        print(f"gpuready rendezvous: {e}", file=sys.stderr)
        return 2
    os.execvpe(command[0], command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
