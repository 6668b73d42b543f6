"""Node classes and host-level settings: what each GPU node must be and how it is built."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gpuready.core.settings.base import Section


class Fabric(Section):
    """A high-speed fabric on the node (seed 001/004: EDR InfiniBand; seed 003: ConnectX-6)."""

    #: The fabric's kind: InfiniBand (seed 001/004, EDR) or RoCE (seed 003, ConnectX-6 100 GbE).
    type: Literal["infiniband", "roce"] = "infiniband"
    #: RDMA devices whose ports must be up, as ``ibdev2netdev`` names them (mlx5_0, ...).
    ports: list[str] = Field(default_factory=list)
    #: Enable Address Translation Services on the ConnectX NIC (needed for GPU peer-to-peer in VMs).
    ats: bool = False
    #: mlxconfig device paths (/dev/mst/...) when ATS is to be set; discovered when empty.
    mst_devices: list[str] = Field(default_factory=list)


class NodeClass(Section):
    """One kind of GPU server: the hardware every node of the class must show."""

    #: As ``nvidia-smi --query-gpu=name`` prints it, e.g. "Tesla V100-SXM2-32GB". Empty for CPU-only.
    gpu_model: str = ""
    gpu_count: int = Field(ge=0, le=64)
    gpu_memory_gib: int = Field(default=0, ge=0)
    #: NVLink links each GPU must have up (V100-SXM2: 6, A100 PCIe bridged pair: 4 per bridge... see docs).
    nvlink_links_per_gpu: int = Field(default=0, ge=0, le=18)
    #: GPU index pairs that must be able to talk peer-to-peer (NVLink-bridged pairs on A100 PCIe).
    p2p_pairs: list[tuple[int, int]] = Field(default_factory=list)
    fabric: Fabric | None = None

    @field_validator("gpu_model")
    @classmethod
    def _model_needs_gpus(cls, value: str) -> str:
        return value.strip()


class Driver(Section):
    """The NVIDIA driver pin (seeds: 418.40.04, 430.26, 470.82.01)."""

    #: Driver branch every node runs, e.g. "470"; the driver role refuses one the distribution lacks.
    branch: str = Field(pattern=r"^\d{3}(-open|-server|-server-open)?$")
    #: Exact version; a different installed version is replaced. Empty: newest of the branch.
    version: str = Field(default="", pattern=r"^(\d{3}\.\d{1,3}(\.\d{1,3})?)?$")
    #: May provisioning reboot a node when the new driver needs it? If not, results say "reboot required".
    allow_reboot: bool = False
    #: URL of the CUDA repository for the nodes' distribution, e.g. a mirror of .../repos/rhel9/x86_64/
    #: (air-gapped sites). Empty: NVIDIA's for each node's distribution.
    repo_url: str = ""
    #: Remove the driver on ``provision cluster --remove`` (off: the driver is kept).
    remove_on_uninstall: bool = False

    @field_validator("branch", mode="before")
    @classmethod
    def _branch_may_be_a_number(cls, value: object) -> object:
        # YAML reads `branch: 535` as an int; a branch number is unambiguous, so accept it.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class SELinux(Section):
    """SELinux on GPU nodes: gpuready labels files, it never switches modes."""

    #: The mode nodes are expected to run; ``any`` accepts whatever they run.
    expect: Literal["enforcing", "permissive", "disabled", "any"] = "any"
    #: Add the seed's persistent file-context rules where SELinux is enabled (nothing where it is disabled).
    manage_file_contexts: bool = True


class Preflight(Section):
    min_free_disk_gib: int = Field(default=10, ge=0)
    #: Stop provisioning a host whose preflight found a failure.
    stop_on_failure: bool = True


ContainerRuntime = Literal["containerd", "crio", "docker", "crio-oci-hook", "none"]
