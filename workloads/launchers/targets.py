"""From the inventory and settings to where the workers run (a Target) and the launcher to use."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.core.errors import BadInput
from gpuready.core.settings.training import TrainingReference
from gpuready.workloads.launchers import Launch, Plan

if TYPE_CHECKING:
    from gpuready.core.inventory import Inventory
    from gpuready.core.settings import Training


@dataclass(frozen=True)
class Target:
    """Where the workers run and what judges them."""

    launcher: str
    where: str  # the check's host column: "localhost", "c4140-01..c4140-02", a namespace
    gpu_model: str
    gpus_per_host: int
    #: the inventory's training.references, looked up before gpuready's own (workloads.controller.references)
    references: tuple[TrainingReference, ...] = ()
    #: how the GPU count was found: "nvidia-smi: 8 GPUs" on this machine, the node class for remote hosts
    found_by: str = ""
    #: on GPUs, a weak-scaling efficiency below this fails
    scaling_floor: float = 0.9


LOCAL_NAMES = ("localhost", "127.0.0.1")
#: the GPU query of the node checks (gpuready.validate.node.node.QUERY_COMMAND), so the nodes lab's replayed
#: nvidia-smi answers it as a real one does
GPU_QUERY = ["--query-gpu=index,name,pci.bus_id,driver_version,persistence_mode", "--format=csv,noheader"]


def _gpu_hosts(inventory: Inventory, limit: str | None) -> list[str]:
    hosts = inventory.limit(limit, "gpu_nodes") if limit else inventory.hosts("gpu_nodes")
    if not hosts:
        raise BadInput(f"{inventory.path}: no hosts in group gpu_nodes to train on")
    return hosts


def local_gpus() -> tuple[list[str], str]:
    """This machine's NVIDIA GPUs by name, as nvidia-smi lists them, and how they were found."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], "no nvidia-smi on this machine"
    try:
        done = subprocess.run([smi, *GPU_QUERY], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return [], "nvidia-smi did not answer in 30s"
    if done.returncode:
        why = (done.stderr or done.stdout).strip().splitlines()
        return [], f"nvidia-smi failed: {why[-1] if why else f'exit {done.returncode}'}"
    names = [line.split(",")[1].strip() for line in done.stdout.splitlines() if line.count(",") >= 1]
    return names, f"nvidia-smi lists {len(names)}"


def target_for(inventory: Inventory, settings: Training, limit: str | None) -> Target:
    refs = tuple(settings.references)
    floor = settings.scaling_floor
    if settings.launcher == "local":
        # what this machine has, not what its node class claims: a CPU run must never pass for a GPU one
        names, found_by = local_gpus()
        local = next((h for h in inventory.hosts("gpu_nodes") if h in LOCAL_NAMES), None)
        node = inventory.node_class(local) if local else None
        model = names[0] if names else (node.gpu_model if node else "")
        return Target("local", "localhost", model, len(names), refs, found_by, floor)
    hosts = _gpu_hosts(inventory, limit)
    node = inventory.node_class(hosts[0])
    where = hosts[0] if len(hosts) == 1 else f"{hosts[0]} (+{len(hosts) - 1})"
    if settings.launcher == "kubernetes":
        where = f"namespace {settings.namespace}"
    found_by = f"node class {inventory.node_class_name(hosts[0])}"
    return Target(settings.launcher, where, node.gpu_model, node.gpu_count, refs, found_by, floor)


def launcher_for(
    inventory: Inventory, settings: Training, target: Target, limit: str | None
) -> Callable[[Plan, int, Path], Launch]:
    if settings.launcher == "local":
        from gpuready.workloads.launchers import local

        return local.launch
    if settings.launcher == "ssh":
        from gpuready.core.inventory.connection import connection_spec
        from gpuready.workloads.launchers import ssh

        hosts = [
            ssh.Host.from_spec(
                connection_spec(name, inventory.host_vars(name)),
                settings.workers_per_host or inventory.node_class(name).gpu_count or 1,
            )
            for name in _gpu_hosts(inventory, limit)
        ]
        return partial(ssh.launch, hosts=hosts, runner=settings.ssh_runner)
    if settings.launcher == "slurm":
        from gpuready.workloads.launchers import slurm

        return partial(
            slurm.launch,
            gpus_per_node=target.gpus_per_host,
            partition=settings.slurm_partition,
            slurm_conf=settings.slurm_conf,
            tasks_per_node=settings.workers_per_host,
        )
    from gpuready.workloads.launchers import kubernetes

    k8s = inventory.settings.kubernetes
    kind = "pytorchjob" if settings.framework == "pytorch" else settings.kubernetes_job
    return partial(
        kubernetes.launch,
        kind=kind,
        gpus_per_node=target.gpus_per_host,
        image=settings.image,
        namespace=settings.namespace,
        kubeconfig=k8s.kubeconfig,
        context=k8s.context,
        operator_wait_s=settings.operator_wait_s,
    )
