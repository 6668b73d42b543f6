"""Node classes and host-level settings: what each GPU node must be and how it is built."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gpuready.core import role_defaults
from gpuready.core.settings.base import Int, Real, Section

XidClass = Literal["hardware", "driver", "application", "unknown"]


class Fabric(Section):
    """A high-speed fabric on the node (Dell's C4140 studies: EDR InfiniBand; Dell's vSphere study: ConnectX-6)."""

    #: The fabric's kind: InfiniBand (Dell's C4140 studies, EDR) or RoCE (Dell's vSphere study, ConnectX-6 100 GbE).
    type: Literal["infiniband", "roce"] = "infiniband"
    #: RDMA devices whose ports must be up, as ``ibdev2netdev`` names them (mlx5_0, ...).
    ports: list[str] = Field(default_factory=list)
    #: Enable Address Translation Services on the ConnectX NIC (needed for GPU peer-to-peer in VMs).
    ats: bool = False
    #: mlxconfig device paths (/dev/mst/...) when ATS is to be set; discovered when empty.
    mst_devices: list[str] = Field(default_factory=list)
    #: Link rate every port must run at, in Gb/s as ``ibstat`` prints it (EDR 100, HDR 200, NDR 400). 0: any.
    rate_gbps: Int = Field(default=0, ge=0)
    #: GPUDirect RDMA expected: the nvidia_peermem module must be loaded (NVIDIA GPUDirect RDMA guide).
    gpudirect_rdma: bool = False
    #: MTU of the ports, kept across reboots (NetworkManager, netplan or ifupdown). 0 leaves each link's MTU
    #: as the driver sets it (IPoIB datagram mode: 2044 on a 2048-byte link MTU; connected mode: up to 65520).
    mtu: Int = Field(default_factory=role_defaults.fabric_mtu, ge=0, le=65520)


class NodeClass(Section):
    """One kind of GPU server: the hardware every node of the class must show."""

    #: As ``nvidia-smi --query-gpu=name`` prints it, e.g. "Tesla V100-SXM2-32GB". Empty for CPU-only.
    gpu_model: str = ""
    gpu_count: Int = Field(ge=0, le=64)
    gpu_memory_gib: Int = Field(default=0, ge=0)
    #: NVLink links each GPU must have up (V100-SXM2: 6, A100 PCIe bridged pair: 4 per bridge... see docs).
    nvlink_links_per_gpu: Int = Field(default=0, ge=0, le=18)
    #: GPU index pairs that must be able to talk peer-to-peer (NVLink-bridged pairs on A100 PCIe).
    p2p_pairs: list[tuple[Int, Int]] = Field(default_factory=list)
    fabric: Fabric | None = None
    #: PCIe generation every GPU's link must reach (compared with the link's maximum). Unset: reported only,
    #: since a slot's wiring or a host's BIOS can legitimately hold a link below the GPU's maximum.
    pcie_gen: Int | None = Field(default=None, ge=1, le=6)
    #: PCIe width (lanes) every GPU's link must have now: a slot narrower than the GPU is declared here.
    #: Unset: the GPU's own maximum width, so a link that trained with missing lanes fails.
    pcie_width: Int | None = Field(default=None, ge=1, le=32)
    #: MIG mode every GPU must be in (true: Enabled, false: Disabled). Unset: not checked.
    mig: bool | None = None
    #: HGX/DGX baseboard with NVSwitches: nvidia-fabricmanager must be running.
    nvswitch: bool = False
    #: A compute tray of a GB200/GB300 NVL rack, whose GPUs share a multi-node NVLink domain: the IMEX service runs
    #: and its domain is UP, every GPU reports the rack's fabric cluster UUID and clique id (NVIDIA IMEX guide).
    #: Hosts of one rack name it in the host variable ``gpuready_nvlink_domain`` to be compared with each other.
    nvlink_domain: bool = False
    #: Lower bounds that replace the reference table's for this class (docs/node-checks.md, "References"),
    #: by metric: matmul_tflops, memory_bandwidth, h2d_bandwidth, d2h_bandwidth, p2p_bandwidth,
    #: nccl_allreduce_busbw.
    references: dict[
        Literal[
            "matmul_tflops",
            "memory_bandwidth",
            "h2d_bandwidth",
            "d2h_bandwidth",
            "p2p_bandwidth",
            "nccl_allreduce_busbw",
        ],
        float,
    ] = Field(default_factory=dict)

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
    #: UEFI Secure Boot on the nodes: ``auto`` asks ``mokutil --sb-state`` on each node. On, Ubuntu nodes get
    #: Canonical's signed precompiled modules and DKMS nodes need the DKMS key enrolled
    #: (docs/provisioning-nvidia.md, "Secure Boot").
    secure_boot: Literal["auto"] | bool = "auto"

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
    min_free_disk_gib: Int = Field(default=10, ge=0)
    #: Stop provisioning a host whose preflight found a failure.
    stop_on_failure: bool = True


ContainerRuntime = Literal["containerd", "crio", "docker", "crio-oci-hook", "none"]


class NodeChecks(Section):
    """How ``validate gpu-node`` judges what it reads."""

    #: Xid events older than this many hours (by the kernel log's clock) are reported, not failed. 0: since boot.
    xid_window_hours: Real = Field(default=24, ge=0)
    #: Xid classes that fail a node (NVIDIA's Xid catalogue): hardware, driver, application, unknown.
    xid_fail_classes: list[XidClass] = Field(default_factory=lambda: list[XidClass](["hardware", "driver", "unknown"]))
    #: Retired pages (single- plus double-bit) at which a GPU is due for replacement: NVIDIA's DCGM fails a GPU at
    #: DCGM_LIMIT_MAX_RETIRED_PAGES = 63 ("updated to match the field diag"; NVIDIA/DCGM
    #: common/DcgmGPUHardwareLimits.h, applied as sbe + dbe >= 63 in its health watch and software plugin).
    retired_pages_limit: Int = Field(default=63, ge=1)
    #: PCIe replays per minute on one GPU above which the link fails; 0: off. NVIDIA's DCGM warns above
    #: DCGM_LIMIT_MAX_PCIREPLAY_RATE = 8 per minute ("the maximum recommended by RM"; NVIDIA/DCGM
    #: common/DcgmGPUHardwareLimits.h). nvidia-smi's replay_counter counts since the driver loaded, at most the
    #: uptime ago: gpuready divides by the uptime, so an average above 8/min means some minute exceeded 8.
    pcie_replays_per_minute: Real = Field(default=8, ge=0)
    #: NVLink error counter (nvidia-smi nvlink -e) per link above which the link fails. A gpuready default.
    nvlink_error_limit: Int = Field(default=100, ge=0)
    #: Corrected (single-bit) ECC errors per hour on one GPU at which it fails gpu.ecc_correctable_rate; 0: off.
    #: NVIDIA's DCGM health watch flags a GPU whose volatile single-bit count grows by DCGM_LIMIT_MAX_SBE_RATE = 10
    #: (NVIDIA/DCGM common/DcgmGPUHardwareLimits.h, which calls the value provisional); gpuready counts it per
    #: hour, over the hours the volatile counter covers (since boot, at least one).
    correctable_errors_per_hour: Real = Field(default=10, ge=0)
    #: The DCGM diagnostic level diag.dcgm runs (dcgmi diag -r LEVEL): 1 quick, 2 medium, 3 long, 4 extended
    #: (NVIDIA DCGM user guide, "Run Levels"). Each level has its own time limit (checks.DCGM_TIMEOUTS).
    dcgm_level: Int = Field(default=1, ge=1, le=4)
