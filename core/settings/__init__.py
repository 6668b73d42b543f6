"""gpuready's own settings: one documented variable, ``gpuready``, checked by this schema.

It lives in the inventory's ``group_vars/all/gpuready.yml``. Sections belong to the
layer that uses them; every section refuses unknown keys.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuready.core.settings.base import Section
from gpuready.core.settings.dcgm import Dcgm
from gpuready.core.settings.kubernetes import Kubernetes
from gpuready.core.settings.nccl_tests import NcclTests
from gpuready.core.settings.nodes import (
    ContainerRuntime,
    Driver,
    Fabric,
    NodeChecks,
    NodeClass,
    Preflight,
    SELinux,
)
from gpuready.core.settings.training import Training, TrainingReference
from gpuready.core.settings.vsphere import GpuVm, Vsphere

#: Host variables gpuready reads (everything else on a host belongs to Ansible or the user).
HOST_VARS = {
    "gpuready_node_class": "the node class (a key of gpuready.node_classes) of a GPU node",
    "gpuready_nvlink_domain": "the multi-node NVLink domain (GB200/GB300 NVL rack) of a node of an nvlink_domain "
    "class: the nodes naming one domain must report one fabric cluster UUID and clique id",
}


class Settings(Section):
    """The ``gpuready`` variable."""

    node_classes: dict[str, NodeClass] = Field(min_length=1)
    driver: Driver
    dcgm: Dcgm = Dcgm()
    nccl_tests: NcclTests = NcclTests()
    container_runtime: ContainerRuntime = "containerd"
    selinux: SELinux = SELinux()
    preflight: Preflight = Preflight()
    node_checks: NodeChecks = NodeChecks()
    kubernetes: Kubernetes = Kubernetes()
    vsphere: Vsphere = Vsphere()
    training: Training = Training()

    @model_validator(mode="after")
    def _classes_named(self) -> Settings:
        for name in self.node_classes:
            if not name.replace("-", "_").replace(".", "_").isidentifier():
                raise ValueError(f"node class name {name!r} must be letters, digits, '-', '_' or '.'")
        return self


__all__ = [
    "HOST_VARS",
    "ContainerRuntime",
    "Dcgm",
    "Driver",
    "Fabric",
    "GpuVm",
    "Kubernetes",
    "NcclTests",
    "NodeChecks",
    "NodeClass",
    "Preflight",
    "SELinux",
    "Settings",
    "Training",
    "TrainingReference",
    "Vsphere",
]
