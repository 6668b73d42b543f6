"""vSphere settings: the vCenter or ESXi connection and the GPU passthrough plan."""

from __future__ import annotations

from pydantic import Field

from gpuready.core.settings.base import Section


class GpuVm(Section):
    """A VM that gets GPUs by passthrough (seed 003: 1 or 2 A100 PCIe on an NVLink pair)."""

    name: str
    esxi_host: str
    #: PCI addresses (0000:3b:00.0) of the GPUs to attach.
    gpus: list[str] = Field(default_factory=list)


class Vsphere(Section):
    port: int = Field(default=443, ge=1, le=65535)
    user: str = ""
    #: Environment variable holding the password (or set ``vcenter_password`` in Ansible Vault).
    password_env: str = "GPUREADY_VCENTER_PASSWORD"
    verify_tls: bool = True
    allow_power_off: bool = False
    #: GPU memory per model in GiB, for the 64-bit MMIO size rule.
    gpu_memory_gib: dict[str, int] = Field(default_factory=lambda: {"A100-PCIE-40GB": 40, "A100-PCIE-80GB": 80})
    #: Per ESXi host: the NVLink-bridged GPU pairs (PCI addresses).
    nvlink_pairs: dict[str, list[tuple[str, str]]] = Field(default_factory=dict)
    max_gpus_per_vm: int = Field(default=2, ge=1)
    gpu_vms: list[GpuVm] = Field(default_factory=list)
