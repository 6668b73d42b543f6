#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vm_gpu_passthrough
short_description: Give a VM exactly its planned passthrough GPUs and reserve its memory
description:
  - Attaches the listed GPUs as PCI passthrough devices and detaches NVIDIA passthrough devices that are
    not listed (other passthrough devices, NICs say, are left alone). No module of community.vmware or
    vmware.vmware attaches a host PCI device to a VM, hence this one.
  - Reserves all guest memory (memoryReservationLockedToMax), which passthrough requires.
  - Attaching or detaching a device needs the VM powered off; the module refuses a powered-on VM
    (power it off first, as the vm_gpu_passthrough role does when allowed). In check mode it reports
    the change, and I(powered_on) tells whether the change needs a power-off.
  - Advanced settings (pciPassthru.*) are not this module's: use vmware.vmware.vm_advanced_settings.
  - Supports check mode and diff.
options:
  vm: {description: The VM's name in vCenter., type: str, required: true}
  esxi_host: {description: The ESXi host the VM must run on (its GPUs belong to that host)., type: str, required: true}
  gpus:
    description: GPUs to attach, as the plan lists them (id, vendor_id, device_id).
    type: list
    elements: dict
    required: true
extends_documentation_fragment: [gpuready.gpu.vsphere]
author: gpuready
"""

EXAMPLES = r"""
- name: VMware | Attach an NVLink pair to a powered-off VM
  gpuready.gpu.vm_gpu_passthrough:
    hostname: vcenter.lab.local
    username: administrator@vsphere.local
    vm: gpuvm-01
    esxi_host: r750xa-01.lab.local
    gpus:
      - {id: "0000:17:00.0", vendor_id: 4318, device_id: 8433}
      - {id: "0000:31:00.0", vendor_id: 4318, device_id: 8433}
"""

RETURN = r"""
attached: {description: GPUs attached (or that would be)., returned: always, type: list}
detached: {description: NVIDIA passthrough devices detached (or that would be)., returned: always, type: list}
reserved: {description: All guest memory was (or would be) reserved now., returned: always, type: bool}
powered_on: {description: The VM is powered on., returned: always, type: bool}
tools_running: {description: VMware Tools run in the guest (a clean guest shutdown is possible)., returned: always, type: bool}
datacenter: {description: The datacenter the VM is in (vmware.vmware.vm_powerstate needs it)., returned: always, type: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuready.gpu.plugins.module_utils.vsphere import CONNECTION_SPEC, fail, require_gpuready, session


def nvidia_passthrough(vm, vim, vendor_id):
    """The VM's NVIDIA passthrough devices by PCI address."""
    found = {}
    for device in vm.config.hardware.device:
        backing = getattr(device, "backing", None)
        if (isinstance(device, vim.vm.device.VirtualPCIPassthrough)
                and isinstance(backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
                and (backing.vendorId & 0xFFFF) == vendor_id):
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


def datacenter_of(vm, vim):
    """The name of the datacenter holding the VM."""
    parent = vm.parent
    while parent is not None and not isinstance(parent, vim.Datacenter):
        parent = parent.parent
    return parent.name if parent is not None else ""


def main():
    module = AnsibleModule(
        argument_spec=dict(vm=dict(type="str", required=True), esxi_host=dict(type="str", required=True),
                           gpus=dict(type="list", elements="dict", required=True), **CONNECTION_SPEC),
        supports_check_mode=True)
    require_gpuready(module)
    from pyVmomi import vim

    from gpuready.core.errors import BadInput
    from gpuready.core.role_defaults import nvidia_vendor_id
    from gpuready.core.platforms.vsphere import find_vm, wait_for_task

    p = module.params
    result = dict(changed=False, attached=[], detached=[], reserved=False, powered_on=False, tools_running=False,
                  datacenter="")
    try:
        with session(module) as si:
            vm = find_vm(si, p["vm"])
            host = vm.runtime.host
            if host is None or host.name != p["esxi_host"]:
                raise BadInput("VM %s runs on %s, not %s" % (vm.name, host.name if host else "no host",
                                                              p["esxi_host"]))
            current = nvidia_passthrough(vm, vim, nvidia_vendor_id())
            wanted = {g["id"]: g for g in p["gpus"]}
            attach = [a for a in wanted if a not in current]
            detach = sorted(a for a in current if a not in wanted)
            reserve = bool(wanted) and not vm.config.memoryReservationLockedToMax
            powered_on = vm.runtime.powerState == vim.VirtualMachinePowerState.poweredOn
            result.update(changed=bool(attach or detach or reserve), attached=attach, detached=detach,
                          reserved=reserve, powered_on=powered_on, datacenter=datacenter_of(vm, vim),
                          tools_running=bool(vm.guest and vm.guest.toolsRunningStatus == "guestToolsRunning"))
            if module._diff:
                locked = bool(vm.config.memoryReservationLockedToMax)
                result["diff"] = dict(
                    before="gpus: %s\nmemoryReservationLockedToMax: %s\n" % (sorted(current), locked),
                    after="gpus: %s\nmemoryReservationLockedToMax: %s\n" % (sorted(wanted), locked or reserve),
                    before_header=vm.name, after_header=vm.name)
            if module.check_mode or not result["changed"]:
                module.exit_json(**result)
            if (attach or detach) and powered_on:
                message = "VM %s is powered on: attaching or detaching a GPU needs it powered off" % vm.name
                module.fail_json(msg=message, error=message, **dict(result, changed=False))
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
            spec = vim.vm.ConfigSpec(deviceChange=changes)
            if reserve:
                spec.memoryReservationLockedToMax = True
            wait_for_task(vm.ReconfigVM_Task(spec=spec), "%s: reconfigure" % vm.name, p["task_timeout"])
    except Exception as e:  # noqa: BLE001 - every error becomes one failure line
        fail(module, e)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
