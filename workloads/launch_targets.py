"""From the inventory and settings to where the workers run (a Target) and the launcher to use."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.core.errors import BadInput
from gpuready.workloads.launchers import Launch, Plan
from gpuready.workloads.sweep import Target

if TYPE_CHECKING:
    from gpuready.core.inventory import Inventory
    from gpuready.core.settings import Training

LOCAL_NAMES = ("localhost", "127.0.0.1")


def _gpu_hosts(inventory: Inventory, limit: str | None) -> list[str]:
    hosts = inventory.limit(limit, "gpu_nodes") if limit else inventory.hosts("gpu_nodes")
    if not hosts:
        raise BadInput(f"{inventory.path}: no hosts in group gpu_nodes to train on")
    return hosts


def target_for(inventory: Inventory, settings: Training, limit: str | None) -> Target:
    refs = tuple(settings.references)
    if settings.launcher == "local":
        local = next((h for h in inventory.hosts("gpu_nodes") if h in LOCAL_NAMES), None)
        node = inventory.node_class(local) if local else None
        return Target("local", "localhost", node.gpu_model if node else "", node.gpu_count if node else 0, refs)
    hosts = _gpu_hosts(inventory, limit)
    node = inventory.node_class(hosts[0])
    where = hosts[0] if len(hosts) == 1 else f"{hosts[0]} (+{len(hosts) - 1})"
    if settings.launcher == "kubernetes":
        where = f"namespace {settings.namespace}"
    return Target(settings.launcher, where, node.gpu_model, node.gpu_count, refs)


def launcher_for(
    inventory: Inventory, settings: Training, target: Target, limit: str | None
) -> Callable[[Plan, int, Path], Launch]:
    if settings.launcher == "local":
        from gpuready.workloads.launchers import local

        return local.launch
    if settings.launcher == "ssh":
        from gpuready.workloads.launchers import ssh

        hosts = []
        for name in _gpu_hosts(inventory, limit):
            hv = inventory.host_vars(name)
            slots = settings.workers_per_host or inventory.node_class(name).gpu_count or 1
            key = (
                str(Path(hv["ansible_ssh_private_key_file"]).expanduser())
                if hv.get("ansible_ssh_private_key_file")
                else ""
            )
            hosts.append(
                ssh.Host(
                    name,
                    str(hv.get("ansible_host") or name),
                    slots,
                    str(hv.get("ansible_user") or ""),
                    key,
                    int(hv.get("ansible_port") or 22),
                )
            )
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
