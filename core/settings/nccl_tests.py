"""nccl-tests settings: NVIDIA's nccl-tests built on nodes with two or more GPUs (the nccl_tests role)."""

from __future__ import annotations

from pydantic import Field

from gpuready.core.settings.base import Section


class NcclTests(Section):
    #: Build nccl-tests (all_reduce_perf, which perf.nccl_allreduce runs) on every node whose class has 2+ GPUs.
    enabled: bool = True
    #: Git URL of nccl-tests; empty: NVIDIA's on GitHub. Name an air-gapped mirror here.
    repo_url: str = ""
    #: nvcc's architectures (nccl-tests' NVCC_GENCODE, e.g. "-gencode=arch=compute_90,code=sm_90"); empty: the
    #: Makefile's list for the CUDA version (longer to build).
    nvcc_gencode: str = ""
    #: The CUDA version of the compiler and NCCL packages ("13.0"); empty reads it from nvidia-smi on the node, or
    #: from the driver branch before the driver has loaded.
    cuda_version: str = Field(default="", pattern=r"^([0-9]+[.][0-9]+)?$")
    #: Remove the build on ``provision cluster --remove`` (NVIDIA's CUDA and NCCL packages stay).
    remove_on_uninstall: bool = False
