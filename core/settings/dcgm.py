"""DCGM settings: NVIDIA Data Center GPU Manager on GPU nodes (the dcgm role)."""

from __future__ import annotations

from pydantic import Field

from gpuready.core.settings.base import Int, Section


class Dcgm(Section):
    #: Install DCGM 4 and start its nvidia-dcgm service on every GPU node (the checks' diagnostics use it).
    enabled: bool = True
    #: The CUDA major of the DCGM package (datacenter-gpu-manager-4-cuda<major>); 0 reads it from nvidia-smi on the
    #: node, or from the driver branch before the driver has loaded.
    cuda_major: Int = Field(default=0, ge=0, le=99)
    #: Remove DCGM on ``provision cluster --remove`` (other tools on the node may use it).
    remove_on_uninstall: bool = False
