"""``gpuready validate``: read-only checks of nodes, clusters, vSphere and training performance."""

from __future__ import annotations

import click

from gpuready.core.lazy import LazyGroup

#: name -> ("module:click command", short help). Add a line when a subcommand works, not before.
COMMANDS: dict[str, tuple[str, str]] = {
    "cluster": ("gpuready.validate.cluster:cluster", "Device plugin, advertised GPUs, cuda-vector-add per GPU node."),
    "gpu-node": ("gpuready.validate.gpu_node:gpu_node", "Check every GPU node: driver, GPUs, topology, compute."),
    "node-condition": (
        "gpuready.validate.node_condition:node_condition",
        "Put a node verdict on its Kubernetes node: a condition and the opt-in taint.",
    ),
    "this-node": (
        "gpuready.validate.this_node:this_node",
        "The node checks on this node, without inventory or SSH; writes a node verdict (Slurm, Kubernetes).",
    ),
    "training": ("gpuready.validate.training:training", "Train CheXNet on 1..N workers; images/s, scaling, report."),
    "vsphere": ("gpuready.validate.vsphere:vsphere", "Read back ATS, GPU passthrough, P2P, MMIO and NVLink pairs."),
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
def validate() -> None:
    """Validate GPU nodes, Kubernetes/OpenShift clusters, vSphere and training performance."""
