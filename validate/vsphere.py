"""``gpuready validate vsphere``: read every GPU passthrough setting back from vCenter and judge it.

Per ESXi host: ATS and the passthrough state of each planned GPU. Per GPU VM: the attached
GPUs, their NVLink pairing, P2P and ACS flags, 64-bit MMIO (on and large enough for the GPUs
attached), firmware, hardware version and memory reservation. Read-only.

In-guest NVLink (``nvidia-smi topo -m`` showing NV links between the pair) is a gpu-node check.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuready.core.command import Context, common_options, execute
from gpuready.core.report.metrics import metrics_option
from gpuready.core.results import Check, RunResult
from gpuready.core.verdict import Verdict

if TYPE_CHECKING:
    from gpuready.core.platforms.vsphere_plan import Plan, VmPlan
    from gpuready.core.settings import Vsphere

REPROVISION = "gpuready provision cluster --tags vsphere --allow-power-off"


@click.command("vsphere")
@common_options
@metrics_option
@click.option("--insecure", is_flag=True, help="Do not verify vCenter's TLS certificate (labs only).")
def vsphere(inventory_path: Path, artifacts: Path | None, verbose: int, insecure: bool) -> None:
    """Read back ATS, GPU passthrough, P2P/ACS, 64-bit MMIO and NVLink pairing from vCenter."""
    execute(Context("validate vsphere", inventory_path, artifacts, verbose, {"insecure": insecure}), _validate)


def _validate(ctx: Context) -> RunResult:
    from gpuready.core import figures
    from gpuready.core.platforms.vsphere import connect, find_host, find_vm
    from gpuready.core.platforms.vsphere_plan import check_static, read_plan, target

    inv = ctx.inventory
    settings = inv.settings.vsphere
    esxi_hosts = inv.hosts("esxi_hosts")
    check_static(settings, esxi_hosts)
    result = ctx.new_result()
    with connect(target(inv, insecure=ctx.options["insecure"])) as si:
        plan = read_plan(si, settings, esxi_hosts)
        for host_plan in plan.hosts:
            result.add(*host_checks(find_host(si, host_plan.name), host_plan.gpus))
        for vm_plan in plan.vms:
            result.add(*vm_checks(find_vm(si, vm_plan.name), vm_plan, settings))
    result.metrics["vsphere"] = {
        "hosts": len(plan.hosts),
        "vms": len(plan.vms),
        "gpus": sum(len(v.gpus) for v in plan.vms),
    }
    for name, unit, value in (
        ("vsphere_hosts", "hosts", len(plan.hosts)),
        ("vsphere_vms", "VMs", len(plan.vms)),
        ("vsphere_vm_gpus", "GPUs", sum(len(v.gpus) for v in plan.vms)),
    ):
        figures.record(result, name, unit, value)
    _note_plan(ctx, plan)
    return result


def _note_plan(ctx: Context, plan: Plan) -> None:
    if ctx.verbose:
        for line in plan.lines():
            ctx.note(f"plan: {line}")


def host_checks(host: Any, gpus: list[str]) -> list[Check]:
    from gpuready.core.platforms.vsphere import ATS_OPTION, host_option, pci_devices

    name = host.name
    value = host_option(host, ATS_OPTION)
    checks = [
        Verdict("vsphere.ats", name, f"{REPROVISION}, then reboot {name}").passed_if(
            str(value).lower() == "true",
            "ATS is on",
            f"ATS is off: expected {ATS_OPTION} true, found {value}",
            f"{ATS_OPTION} = {value} (the configured value; ESXi uses it from its next boot)",
        )
    ]
    devices = pci_devices(host)
    for gpu in gpus:
        d = devices[gpu]
        v = Verdict(f"vsphere.passthrough.{gpu}", name, REPROVISION)
        evidence = (
            f"{gpu} {d.pci_id} {d.name}: passthruCapable {d.passthru_capable}, passthruEnabled "
            f"{d.passthru_enabled}, passthruActive {d.passthru_active}"
        )
        if d.passthru_enabled and d.passthru_active:
            checks.append(v.passed(f"{gpu} is passed through", evidence))
        elif d.passthru_enabled:
            checks.append(v.failed(f"{gpu}: passthrough enabled but not active", evidence, remedy=f"reboot {name}"))
        else:
            checks.append(v.failed(f"{gpu}: passthrough is off, expected on", evidence))
    return checks


def _flag(extra: dict[str, str], key: str) -> bool:
    return extra.get(key, "").strip().lower() == "true"


def vm_checks(vm: Any, plan: VmPlan, settings: Vsphere) -> list[Check]:
    from gpuready.core.platforms.vsphere import vm_extra_config, vm_gpu_ids

    name = plan.name
    extra = vm_extra_config(vm)
    attached = vm_gpu_ids(vm)
    wanted = [g.id for g in plan.gpus]

    def verdict(id: str, remedy: str = REPROVISION) -> Verdict:
        return Verdict(f"vsphere.vm.{id}", name, remedy)

    gpu_evidence = f"attached NVIDIA passthrough devices: {', '.join(attached) or 'none'}"
    checks = [
        verdict("gpus").passed_if(
            sorted(attached) == sorted(wanted) and len(attached) == len(set(attached)),
            f"{len(wanted)} GPU(s) attached as planned",
            f"expected GPUs {', '.join(wanted) or 'none'}, found {', '.join(attached) or 'none'}",
            gpu_evidence,
        )
    ]

    pairs = {tuple(sorted(p)) for p in settings.nvlink_pairs.get(plan.esxi_host, [])}
    declared = "; ".join(" + ".join(p) for p in sorted(pairs)) or "none declared"
    if len(attached) < 2:
        checks.append(verdict("nvlink_pair").skipped(f"{len(attached)} GPU attached: no pair to check", gpu_evidence))
    else:
        checks.append(
            verdict("nvlink_pair").passed_if(
                len(attached) == 2 and tuple(sorted(attached)) in pairs,
                f"{attached[0]} + {attached[1]} are an NVLink pair",
                f"attached GPUs {', '.join(attached)} are not one NVLink pair on {plan.esxi_host} (pairs: {declared})",
                gpu_evidence,
            )
        )

    for key, id, why in (
        ("pciPassthru.allowP2P", "p2p", "GPU peer-to-peer"),
        ("pciPassthru.RelaxACSforP2P", "relax_acs", "P2P through PCIe switches"),
    ):
        checks.append(
            verdict(id).passed_if(
                _flag(extra, key),
                f"{key} is true",
                f"{key}: expected true for {why}, found {extra.get(key, 'unset')}",
                f"{key} = {extra.get(key, '(unset)')}",
            )
        )

    size_text = extra.get("pciPassthru.64bitMMIOSizeGB", "")
    size = int(size_text) if size_text.strip().isdigit() else 0
    total = sum(g.memory_gib for g in plan.gpus)
    evidence = (
        f"pciPassthru.use64bitMMIO = {extra.get('pciPassthru.use64bitMMIO', '(unset)')}, "
        f"pciPassthru.64bitMMIOSizeGB = {size_text or '(unset)'}; GPUs: "
        f"{' + '.join(f'{g.model} {g.memory_gib} GiB' for g in plan.gpus) or 'none'}; rule: next power of "
        f"two at or above 2 x {total} GiB = {plan.mmio_gib} GiB"
    )
    mmio_on = _flag(extra, "pciPassthru.use64bitMMIO")
    if not plan.gpus:
        checks.append(verdict("mmio").skipped("no GPU planned", evidence))
    else:
        checks.append(
            verdict("mmio").passed_if(
                mmio_on and size >= plan.mmio_gib,
                f"64-bit MMIO on, {size} GiB (needs {plan.mmio_gib})",
                f"expected 64-bit MMIO of at least {plan.mmio_gib} GiB, found "
                f"{f'{size} GiB' if mmio_on else '64-bit MMIO off'} (the GPU would show 'BAR1 is 0M')",
                evidence,
            )
        )

    firmware = vm.config.firmware or "bios"
    checks.append(
        verdict("firmware", "switch the VM to EFI (the guest OS must boot with EFI); gpuready does not").passed_if(
            firmware == "efi",
            "EFI firmware",
            f"expected EFI firmware for GPUs with large BARs, found {firmware}",
            f"firmware = {firmware}",
        )
    )

    version_text = vm.config.version or ""
    version = int(version_text.removeprefix("vmx-")) if version_text.removeprefix("vmx-").isdigit() else 0
    checks.append(
        verdict(
            "hardware_version", "upgrade the VM's compatibility in vCenter (powered off; gpuready does not)"
        ).passed_if(
            version >= settings.min_hardware_version,
            f"hardware version {version_text}",
            f"expected hardware version vmx-{settings.min_hardware_version} or later, found {version_text}",
            f"config.version = {version_text}",
        )
    )

    memory_mb = vm.config.hardware.memoryMB
    reservation = vm.config.memoryAllocation.reservation if vm.config.memoryAllocation else 0
    locked = bool(vm.config.memoryReservationLockedToMax)
    evidence = f"memoryMB = {memory_mb}, reservation = {reservation} MB, memoryReservationLockedToMax = {locked}"
    if not plan.gpus:
        checks.append(verdict("memory_reservation").skipped("no GPU planned", evidence))
    else:
        checks.append(
            verdict("memory_reservation").passed_if(
                locked or (reservation or 0) >= memory_mb,
                "all guest memory reserved",
                f"passthrough needs all {memory_mb} MB reserved, found {reservation} MB",
                evidence,
            )
        )
    return checks
