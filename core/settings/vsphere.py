"""vSphere settings: the vCenter or ESXi connection and the GPU passthrough plan.

The vCenter's address is its host in the inventory's ``vcenter`` group (``ansible_host`` if set).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from gpuready.core.settings.base import Int, Section

#: A PCI address as ESXi writes it: domain:bus:slot.function, lower-case hex.
PCI_ADDRESS = r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$"


class GpuVm(Section):
    """A VM that gets GPUs by passthrough (Dell's vSphere study: 1 or 2 A100 PCIe on an NVLink pair)."""

    name: str
    esxi_host: str
    #: PCI addresses (0000:3b:00.0) of the GPUs to attach.
    gpus: list[str] = Field(default_factory=list)

    @field_validator("gpus")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        import re

        for address in value:
            if not re.match(PCI_ADDRESS, address):
                raise ValueError(f"{address!r} is not a PCI address like 0000:17:00.0")
        return value


class Vsphere(Section):
    port: Int = Field(default=443, ge=1, le=65535)
    user: str = ""
    #: Environment variable holding the password (or set ``vcenter_password`` in Ansible Vault).
    password_env: str = "GPUREADY_VCENTER_PASSWORD"
    #: Verify vCenter's TLS certificate (``--insecure`` turns it off for one run, for labs).
    verify_tls: bool = True
    #: PEM file of the CA (or the certificate) to trust for vCenter; empty: the system's CAs.
    ca_file: str = ""
    #: May provisioning power off a VM whose GPUs or pciPassthru settings change (``--allow-power-off``)?
    allow_power_off: bool = False
    #: GPU memory per model in GiB, for the 64-bit MMIO size rule.
    gpu_memory_gib: dict[str, Int] = Field(
        default_factory=lambda: {"A100-PCIE-40GB": 40, "A100-PCIE-80GB": 80, "V100-PCIE-32GB": 32, "T4": 16}
    )
    #: GPU model of each PCI vendor:device id (lspci -n), to look up its memory.
    gpu_models: dict[str, str] = Field(
        default_factory=lambda: {
            "10de:20f1": "A100-PCIE-40GB",
            "10de:20b5": "A100-PCIE-80GB",
            "10de:1db6": "V100-PCIE-32GB",
            "10de:1eb8": "T4",
        }
    )
    #: Per ESXi host: the NVLink-bridged GPU pairs (PCI addresses).
    nvlink_pairs: dict[str, list[tuple[str, str]]] = Field(default_factory=dict)
    #: Most GPUs one VM may get (Dell's vSphere study's R750xa: one NVLink pair, so 2).
    max_gpus_per_vm: Int = Field(default=2, ge=1)
    #: Oldest VM hardware version (vmx-N) accepted for GPU passthrough VMs.
    min_hardware_version: Int = Field(default=17, ge=4)
    #: Seconds to wait for one vSphere task (reconfigure, power) before giving up.
    task_timeout_s: Int = Field(default=600, ge=1)
    #: Seconds one request to vCenter (the connection, then each API call) may take before vCenter counts as
    #: unreachable (exit 3): pyVmomi's own version discovery waits forever on a vCenter that accepts and never
    #: answers.
    request_timeout_s: Int = Field(default=60, ge=1, le=3600)
    #: Seconds one step of the vSphere apply (one task of the play, on one ESXi host or VM) may take before vCenter
    #: counts as no longer answering: the run stops there, exit 3, with what changed before written. The
    #: community.vmware and vmware.vmware modules take no timeout of their own, so this is Ansible's task keyword
    #: ``timeout`` ("Time limit for the task action to execute in, if exceeded, Ansible will interrupt the process",
    #: https://docs.ansible.com/ansible/latest/reference_appendices/playbooks_keywords.html; ansible-core >= 2.10).
    #: 720: the longest a step waits in the normal course, one vSphere task (``task_timeout_s``, 600) and a request
    #: before and after it (``request_timeout_s``, 60 each).
    step_timeout_s: Int = Field(default=720, ge=1, le=86400)
    gpu_vms: list[GpuVm] = Field(default_factory=list)
