"""The vSphere GPU passthrough plan: which GPUs go to which VM, with which settings.

A plan is refused, with one line saying why, before anything changes when it:
splits an NVLink pair, attaches a GPU twice, gives a VM more GPUs than the host's limit,
names a host or VM vCenter does not know, or names a PCI address that is not a GPU on
that host.

The 64-bit MMIO rule: ``pciPassthru.64bitMMIOSizeGB`` is the smallest power of two at or
above twice the total memory of the VM's GPUs. A GPU's BAR1 is a power of two at least as
large as its memory (A100 40 GB: 64 GiB) and must be naturally aligned, so "twice the
memory, rounded up to a power of two" always leaves room for every BAR of every GPU.
2x A100 40 GB: 2 x 80 = 160 -> 256 GiB; 1x A100 40 GB: 80 -> 128 GiB.

The plan is pure data computed from the settings and the hosts' PCI device lists, so it is
tested with device lists recorded from real hosts as well as against vcsim.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from gpuready.core.errors import BadInput

if TYPE_CHECKING:
    from gpuready.core.inventory import Inventory
    from gpuready.core.platforms.vsphere import PciDevice, Target
    from gpuready.core.settings import Vsphere


def mmio_size_gib(total_gpu_memory_gib: int) -> int:
    """Smallest power of two at or above twice the GPUs' total memory (0 for no GPU)."""
    if total_gpu_memory_gib <= 0:
        return 0
    size = 1
    while size < 2 * total_gpu_memory_gib:
        size *= 2
    return size


def vm_extra_config(mmio_gib: int) -> dict[str, str]:
    """The VM advanced settings for GPU peer-to-peer and large BARs, as vSphere stores them."""
    return {
        "pciPassthru.allowP2P": "true",
        "pciPassthru.RelaxACSforP2P": "true",
        "pciPassthru.use64bitMMIO": "TRUE",
        "pciPassthru.64bitMMIOSizeGB": str(mmio_gib),
    }


@dataclass
class PlannedGpu:
    id: str
    pci_id: str  # vendor:device, 10de:20f1
    vendor_id: int
    device_id: int
    model: str
    memory_gib: int


@dataclass
class VmPlan:
    name: str
    esxi_host: str
    gpus: list[PlannedGpu]
    #: The NVLink pair the VM's two GPUs form, when it has two.
    nvlink_pair: list[str]
    mmio_gib: int
    extra_config: dict[str, str]


@dataclass
class HostPlan:
    name: str
    #: GPUs to pass through on this host (those some VM gets).
    gpus: list[str]
    ats: bool = True


@dataclass
class Plan:
    hosts: list[HostPlan] = field(default_factory=list)
    vms: list[VmPlan] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """What the plan does, one line per host and VM, for the terminal."""
        out = [
            f"ESXi {h.name}: ATS on (VMkernel.Boot.atsSupport, needs a host reboot), passthrough for "
            f"{', '.join(h.gpus) or 'no GPU'}"
            for h in self.hosts
        ]
        for vm in self.vms:
            gpus = " + ".join(f"{g.id} ({g.model})" for g in vm.gpus) or "no GPU"
            pair = " — NVLink pair" if vm.nvlink_pair else ""
            out.append(
                f"VM {vm.name} on {vm.esxi_host}: {gpus}{pair}; P2P + RelaxACS on; 64-bit MMIO "
                f"{vm.mmio_gib} GiB; memory reserved"
            )
        return out


def check_static(settings: Vsphere, esxi_hosts: list[str]) -> None:
    """Refuse what is wrong in the settings alone (no vCenter needed)."""
    pairs_of: dict[str, dict[str, tuple[str, str]]] = {}
    for host, pairs in settings.nvlink_pairs.items():
        if host not in esxi_hosts:
            raise BadInput(f"gpuready.vsphere.nvlink_pairs: host {host!r} is not in the inventory's esxi_hosts group")
        seen: dict[str, tuple[str, str]] = {}
        for pair in pairs:
            if pair[0] == pair[1]:
                raise BadInput(f"gpuready.vsphere.nvlink_pairs[{host}]: {pair[0]} is paired with itself")
            for gpu in pair:
                if gpu in seen:
                    raise BadInput(f"gpuready.vsphere.nvlink_pairs[{host}]: {gpu} is in two NVLink pairs")
                seen[gpu] = pair
        pairs_of[host] = seen
    names: set[str] = set()
    owner: dict[tuple[str, str], str] = {}
    for vm in settings.gpu_vms:
        where = f"gpuready.vsphere.gpu_vms[{vm.name}]"
        if vm.name in names:
            raise BadInput(f"{where}: VM listed twice")
        names.add(vm.name)
        if vm.esxi_host not in esxi_hosts:
            raise BadInput(
                f"{where}: ESXi host {vm.esxi_host!r} is not in the inventory's esxi_hosts group "
                f"({', '.join(esxi_hosts) or 'empty'})"
            )
        if len(set(vm.gpus)) != len(vm.gpus):
            raise BadInput(f"{where}: a GPU is attached twice ({', '.join(vm.gpus)})")
        for gpu in vm.gpus:
            other = owner.get((vm.esxi_host, gpu))
            if other:
                raise BadInput(f"{where}: GPU {gpu} on {vm.esxi_host} is already attached to VM {other}")
            owner[(vm.esxi_host, gpu)] = vm.name
        if len(vm.gpus) > settings.max_gpus_per_vm:
            raise BadInput(
                f"{where}: {len(vm.gpus)} GPUs exceed the limit of {settings.max_gpus_per_vm} per VM "
                f"on {vm.esxi_host} (gpuready.vsphere.max_gpus_per_vm)"
            )
        if len(vm.gpus) > 1:
            _check_pairs(where, vm.esxi_host, vm.gpus, pairs_of.get(vm.esxi_host, {}))


def _check_pairs(where: str, host: str, gpus: list[str], pairs: dict[str, tuple[str, str]]) -> None:
    """A multi-GPU VM must get whole NVLink pairs: peer-to-peer over PCIe alone is what we avoid."""
    if not pairs:
        raise BadInput(
            f"{where}: {len(gpus)} GPUs but no NVLink pairs are declared for {host} (gpuready.vsphere.nvlink_pairs)"
        )
    for gpu in gpus:
        pair = pairs.get(gpu)
        if pair is None:
            raise BadInput(f"{where}: GPU {gpu} is in no NVLink pair on {host}; a multi-GPU VM gets whole pairs")
        partner = pair[1] if pair[0] == gpu else pair[0]
        if partner not in gpus:
            raise BadInput(
                f"{where}: splits the NVLink pair {pair[0]} + {pair[1]} on {host}: attach both GPUs of a pair to one VM"
            )


def make_plan(settings: Vsphere, esxi_hosts: list[str], devices: dict[str, dict[str, PciDevice]]) -> Plan:
    """The plan for the settings, given each ESXi host's PCI devices (by address)."""
    check_static(settings, esxi_hosts)
    plan = Plan()
    wanted: dict[str, list[str]] = {}
    for vm in settings.gpu_vms:
        host_devices = devices.get(vm.esxi_host)
        if host_devices is None:
            raise BadInput(f"no PCI device list for ESXi host {vm.esxi_host!r}")
        gpus = [_planned_gpu(settings, vm.name, vm.esxi_host, host_devices, gpu) for gpu in vm.gpus]
        total = sum(g.memory_gib for g in gpus)
        mmio = mmio_size_gib(total)
        pair = sorted(vm.gpus) if len(vm.gpus) == 2 else []
        plan.vms.append(
            VmPlan(
                name=vm.name,
                esxi_host=vm.esxi_host,
                gpus=gpus,
                nvlink_pair=pair,
                mmio_gib=mmio,
                extra_config=vm_extra_config(mmio) if gpus else {},
            )
        )
        wanted.setdefault(vm.esxi_host, []).extend(vm.gpus)
    for host in esxi_hosts:
        plan.hosts.append(HostPlan(name=host, gpus=sorted(wanted.get(host, []))))
    return plan


def _planned_gpu(settings: Vsphere, vm: str, host: str, devices: dict[str, PciDevice], address: str) -> PlannedGpu:
    from gpuready.core.role_defaults import nvidia_vendor_id

    where = f"gpuready.vsphere.gpu_vms[{vm}]"
    nvidia = nvidia_vendor_id()
    device = devices.get(address)
    if device is None:
        gpus = sorted(d.id for d in devices.values() if d.vendor_id == nvidia)
        raise BadInput(f"{where}: no PCI device {address} on {host} (its NVIDIA devices: {', '.join(gpus) or 'none'})")
    if device.vendor_id != nvidia:
        raise BadInput(f"{where}: {address} on {host} is {device.name or device.pci_id}, not an NVIDIA GPU")
    model = settings.gpu_models.get(device.pci_id)
    if model is None:
        raise BadInput(
            f"{where}: GPU {address} on {host} is {device.pci_id} ({device.name}): add it to "
            "gpuready.vsphere.gpu_models and its memory to gpu_memory_gib"
        )
    if model not in settings.gpu_memory_gib:
        raise BadInput(f"{where}: no memory size for GPU model {model!r}: add it to gpuready.vsphere.gpu_memory_gib")
    return PlannedGpu(
        id=address,
        pci_id=device.pci_id,
        vendor_id=device.vendor_id,
        device_id=device.device_id,
        model=model,
        memory_gib=settings.gpu_memory_gib[model],
    )


def where(inventory: Inventory, host: str) -> str:
    """How messages name the vCenter ``host`` of the inventory (:attr:`Target.where`); no password needed."""
    from gpuready.core.inventory import connection
    from gpuready.core.platforms.vsphere import Target

    return Target(host=connection.address(host, inventory.host_vars(host)), port=inventory.settings.vsphere.port).where


def target(inventory: Inventory, *, insecure: bool = False) -> Target:
    """The vCenter to talk to: the one host of the ``vcenter`` group, the password from the environment."""
    from gpuready.core.inventory import connection
    from gpuready.core.platforms.vsphere import Target, password_from_env

    hosts = inventory.hosts("vcenter")
    if len(hosts) != 1:
        raise BadInput(f"{inventory.path}: the vcenter group must hold exactly one host (it has {len(hosts)})")
    settings = inventory.settings.vsphere
    if not settings.user:
        raise BadInput("gpuready.vsphere.user is empty: name the vCenter user")
    address = connection.address(hosts[0], inventory.host_vars(hosts[0]))
    return Target(
        host=address,
        port=settings.port,
        user=settings.user,
        password=password_from_env(settings.password_env),
        verify_tls=settings.verify_tls and not insecure,
        ca_file=settings.ca_file,
        timeout_s=settings.request_timeout_s,
    )


def read_plan(si: Any, settings: Vsphere, esxi_hosts: list[str], *, provisioning: bool = False) -> Plan:
    """Check the settings, read the hosts and VMs from vCenter, and make the plan (refusing a bad one).

    ``provisioning`` also refuses a GPU VM that boots BIOS: the plan turns on 64-bit MMIO, which VMware
    supports only for VMs that boot EFI (validation reports such a VM as a finding instead).
    """
    from gpuready.core.platforms.vsphere import find_host, find_vm, pci_devices

    check_static(settings, esxi_hosts)
    devices = {}
    for name in sorted({vm.esxi_host for vm in settings.gpu_vms} | set(settings.nvlink_pairs)):
        devices[name] = pci_devices(find_host(si, name))
    for vm in settings.gpu_vms:
        found = find_vm(si, vm.name)
        runs_on = found.runtime.host.name if found.runtime.host else "?"
        if runs_on != vm.esxi_host:
            raise BadInput(
                f"gpuready.vsphere.gpu_vms[{vm.name}]: the VM is on ESXi host {runs_on}, not "
                f"{vm.esxi_host}: passthrough GPUs belong to the host the VM runs on"
            )
        if provisioning and vm.gpus:
            refuse_bios(vm.name, found)
    return make_plan(settings, esxi_hosts, devices)


def refuse_bios(name: str, vm: Any) -> None:
    """A VM that gets GPUs must boot EFI: VMware maps the large 64-bit MMIO the plan sets only for EFI guests
    (VMware, "How to Enable Nvidia V100 GPU in Passthrough mode on vSphere": "the Guest OS must boot with EFI",
    for devices that map more than 16 GB; every data-centre GPU gpuready plans does)."""
    firmware = vm.config.firmware or "bios"
    if firmware != "efi":
        raise BadInput(
            f"gpuready.vsphere.gpu_vms[{name}]: the VM boots {firmware.upper()}, and its GPUs need 64-bit MMIO, "
            "which VMware supports only with EFI firmware: switch the VM to EFI (with an EFI install of its "
            "guest OS), then provision again"
        )


def plan_for_inventory(inventory: Inventory, *, insecure: bool = False) -> Plan:
    """Connect to the inventory's vCenter and make the plan; BadInput (exit 2) or Unreachable (exit 3) if not."""
    from gpuready.core.platforms.vsphere import connect

    settings = inventory.settings.vsphere
    check_static(settings, inventory.hosts("esxi_hosts"))
    with connect(target(inventory, insecure=insecure)) as si:
        return read_plan(si, settings, inventory.hosts("esxi_hosts"), provisioning=True)


def runs_vsphere(inventory: Inventory, tags: list[str] | None, limit: str | None) -> bool:
    """Does this `provision cluster` run reach the vSphere play (tag vsphere, a vcenter host in the limit)?"""
    if tags and not {"vsphere", "all"} & set(tags):
        return False
    hosts = inventory.hosts("vcenter")
    return bool(hosts) and (not limit or bool(set(hosts) & set(inventory.limit(limit))))


def provision_extra_vars(
    inventory: Inventory, *, tags: list[str] | None, limit: str | None, insecure: bool, allow_power_off: bool, note: Any
) -> dict[str, Any]:
    """Before the playbook: make the plan (refusing a bad one, exit 2; an unreachable vCenter, exit 3),
    show it, and return the extra vars the vSphere play needs."""
    if not runs_vsphere(inventory, tags, limit):
        if insecure or allow_power_off:
            note("--insecure and --allow-power-off apply to the vSphere layer, which this run does not include")
        return {}
    import os

    settings = inventory.settings.vsphere
    extra_vars = {
        "gpuready_vsphere_insecure": insecure,
        "gpuready_vsphere_allow_power_off": allow_power_off or settings.allow_power_off,
        "gpuready_vsphere_ca_file": settings.ca_file,
    }
    if os.environ.get(settings.password_env):
        plan = plan_for_inventory(inventory, insecure=insecure)
        for line in plan.lines():
            note(f"plan: {line}")
        # Made once: the vsphere_plan role uses this one instead of reading vCenter again.
        extra_vars["gpuready_vsphere_plan"] = {"plan": plan.to_dict(), "lines": plan.lines()}
    else:
        # The password may be vcenter_password in Ansible Vault, which only Ansible opens:
        # then the play's first task makes and checks the plan.
        check_static(settings, inventory.hosts("esxi_hosts"))
        note(f"${settings.password_env} is not set: the vSphere plan is made by Ansible (vcenter_password from Vault)")
    return extra_vars
