#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vm_gpu_passthrough
short_description: Give a VM exactly its planned passthrough GPUs, peer-to-peer and 64-bit MMIO settings
description:
  - Attaches the listed GPUs as PCI passthrough devices and detaches NVIDIA passthrough devices that are
    not listed (other passthrough devices, NICs say, are left alone).
  - Sets the VM advanced settings given in I(extra_config) (pciPassthru.allowP2P, RelaxACSforP2P,
    use64bitMMIO, 64bitMMIOSizeGB) and reserves all guest memory, which passthrough requires.
  - Device and pciPassthru changes need the VM powered off. A powered-on VM is powered off only with
    I(allow_power_off), and is powered on again afterwards; otherwise the module fails saying so
    (in check mode it reports the change and that it needs a power-off).
  - Supports check mode and diff.
options:
  vm: {description: The VM's name in vCenter., type: str, required: true}
  esxi_host: {description: The ESXi host the VM must run on (its GPUs belong to that host)., type: str, required: true}
  gpus:
    description: GPUs to attach, as the plan lists them (id, vendor_id, device_id).
    type: list
    elements: dict
    required: true
  extra_config: {description: VM advanced settings to set., type: dict, default: {}}
  allow_power_off: {description: May a powered-on VM be powered off for the change., type: bool, default: false}
extends_documentation_fragment: [gpuready.gpu.vsphere]
author: gpuready
"""

EXAMPLES = r"""
- name: VMware | Attach an NVLink pair to a VM
  gpuready.gpu.vm_gpu_passthrough:
    hostname: vcenter.lab.local
    username: administrator@vsphere.local
    vm: gpuvm-01
    esxi_host: r750xa-01.lab.local
    gpus:
      - {id: "0000:17:00.0", vendor_id: 4318, device_id: 8433}
      - {id: "0000:31:00.0", vendor_id: 4318, device_id: 8433}
    extra_config:
      pciPassthru.allowP2P: "true"
      pciPassthru.RelaxACSforP2P: "true"
      pciPassthru.use64bitMMIO: "TRUE"
      pciPassthru.64bitMMIOSizeGB: "256"
    allow_power_off: true
"""

RETURN = r"""
attached: {description: GPUs attached (or that would be)., returned: always, type: list}
detached: {description: NVIDIA passthrough devices detached (or that would be)., returned: always, type: list}
extra_config: {description: Advanced settings changed, with their new values., returned: always, type: dict}
power_off_needed: {description: The change needs the VM powered off and it is on., returned: always, type: bool}
power_cycled: {description: The VM was powered off and on again for the change., returned: always, type: bool}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuready.gpu.plugins.module_utils.vsphere import CONNECTION_SPEC, fail, require_gpuready, session

NVIDIA = 0x10DE


def nvidia_passthrough(vm, vim):
    """The VM's NVIDIA passthrough devices by PCI address."""
    found = {}
    for device in vm.config.hardware.device:
        backing = getattr(device, "backing", None)
        if (isinstance(device, vim.vm.device.VirtualPCIPassthrough)
                and isinstance(backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
                and (backing.vendorId & 0xFFFF) == NVIDIA):
            found[backing.id] = device
    return found


def system_id(vm, host, address):
    """The systemId vSphere wants in the device backing: from the config target, else the host's UUID."""
    try:
        target = vm.environmentBrowser.QueryConfigTarget(host=host)
        for item in (target.pciPassthrough or []) if target else []:
            if item.pciDevice.id == address:
                return item.systemId
    except Exception:  # noqa: BLE001 - simulators and old hosts lack pciPassthrough in the config target
        pass
    return host.hardware.systemInfo.uuid


def same(current, wanted):
    # vSphere keeps these as strings; "TRUE" and "true" mean the same to ESXi.
    return current is not None and str(current).strip().lower() == str(wanted).strip().lower()


def power_off(vm, vim, wait_for_task, timeout):
    """A clean guest shutdown when VMware Tools run (waited for), else a power-off."""
    import time

    if vm.guest and vm.guest.toolsRunningStatus == "guestToolsRunning":
        vm.ShutdownGuest()
        deadline = time.monotonic() + min(timeout, 300)
        while time.monotonic() < deadline:
            if vm.runtime.powerState == vim.VirtualMachinePowerState.poweredOff:
                return
            time.sleep(2)
    wait_for_task(vm.PowerOffVM_Task(), "%s: power off" % vm.name, timeout)


def main():
    module = AnsibleModule(
        argument_spec=dict(vm=dict(type="str", required=True), esxi_host=dict(type="str", required=True),
                           gpus=dict(type="list", elements="dict", required=True),
                           extra_config=dict(type="dict", default={}),
                           allow_power_off=dict(type="bool", default=False), **CONNECTION_SPEC),
        supports_check_mode=True)
    require_gpuready(module)
    from pyVmomi import vim

    from gpuready.core.errors import BadInput
    from gpuready.core.vsphere import find_vm, vm_extra_config, wait_for_task

    p = module.params
    timeout = p["task_timeout"]
    result = dict(changed=False, attached=[], detached=[], extra_config={}, power_off_needed=False,
                  power_cycled=False)
    try:
        with session(module) as si:
            vm = find_vm(si, p["vm"])
            host = vm.runtime.host
            if host is None or host.name != p["esxi_host"]:
                raise BadInput("VM %s runs on %s, not %s" % (vm.name, host.name if host else "no host",
                                                              p["esxi_host"]))
            current = nvidia_passthrough(vm, vim)
            wanted = {g["id"]: g for g in p["gpus"]}
            attach = [a for a in wanted if a not in current]
            detach = sorted(a for a in current if a not in wanted)
            extra_now = vm_extra_config(vm)
            extra = dict((k, str(v)) for k, v in sorted(p["extra_config"].items()) if not same(extra_now.get(k), v))
            reserve = bool(wanted) and not vm.config.memoryReservationLockedToMax
            needs_off = bool(attach or detach or extra)
            powered_on = vm.runtime.powerState == vim.VirtualMachinePowerState.poweredOn
            result.update(changed=bool(needs_off or reserve), attached=attach, detached=detach, extra_config=extra,
                          power_off_needed=needs_off and powered_on)
            if module._diff:
                result["diff"] = dict(
                    before="gpus: %s\n%s\nmemoryReservationLockedToMax: %s\n" % (
                        sorted(current), "\n".join("%s: %s" % (k, extra_now.get(k)) for k in extra),
                        bool(vm.config.memoryReservationLockedToMax)),
                    after="gpus: %s\n%s\nmemoryReservationLockedToMax: %s\n" % (
                        sorted(wanted), "\n".join("%s: %s" % (k, v) for k, v in extra.items()),
                        bool(wanted) or bool(vm.config.memoryReservationLockedToMax)),
                    before_header=vm.name, after_header=vm.name)
            if module.check_mode or not result["changed"]:
                if result["power_off_needed"]:
                    module.warn("%s is powered on: this change needs it powered off (--allow-power-off)" % vm.name)
                module.exit_json(**result)
            if result["power_off_needed"] and not p["allow_power_off"]:
                message = ("VM %s is powered on and attaching GPUs or changing pciPassthru settings needs it powered "
                           "off: rerun with --allow-power-off (or set gpuready.vsphere.allow_power_off)" % vm.name)
                result["changed"] = False
                module.fail_json(msg=message, error=message, **result)
            changes = []
            for n, address in enumerate(attach):
                gpu = wanted[address]
                backing = vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo(
                    id=address, deviceId="%x" % (int(gpu["device_id"]) & 0xFFFF),
                    systemId=system_id(vm, host, address), vendorId=int(gpu["vendor_id"]),
                    deviceName=str(gpu.get("model", "")))
                changes.append(vim.vm.device.VirtualDeviceSpec(
                    operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
                    device=vim.vm.device.VirtualPCIPassthrough(key=-(n + 1), backing=backing)))
            for address in detach:
                changes.append(vim.vm.device.VirtualDeviceSpec(
                    operation=vim.vm.device.VirtualDeviceSpec.Operation.remove, device=current[address]))
            spec = vim.vm.ConfigSpec(deviceChange=changes,
                                     extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in extra.items()])
            if reserve:
                spec.memoryReservationLockedToMax = True
            try:
                if result["power_off_needed"]:
                    power_off(vm, vim, wait_for_task, timeout)
                    result["power_cycled"] = True
                wait_for_task(vm.ReconfigVM_Task(spec=spec), "%s: reconfigure" % vm.name, timeout)
            finally:
                # Return the VM to its previous power state, even when the reconfigure failed.
                if result["power_cycled"]:
                    wait_for_task(vm.PowerOnVM_Task(), "%s: power on" % vm.name, timeout)
    except Exception as e:  # noqa: BLE001 - every error becomes one failure line
        fail(module, e)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
