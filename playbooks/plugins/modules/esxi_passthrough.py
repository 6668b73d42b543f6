#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: esxi_passthrough
short_description: Enable PCI passthrough (DirectPath I/O) for devices of an ESXi host
description:
  - Enables passthrough for the listed PCI devices through the host's PCI passthrough system
    (community.vmware 5.x has no module for it). Devices not listed are left as they are.
  - Supports check mode and diff.
options:
  esxi_host: {description: The ESXi host as vCenter names it., type: str, required: true}
  devices: {description: PCI addresses (0000:17:00.0)., type: list, elements: str, required: true}
extends_documentation_fragment: [gpuready.gpu.vsphere]
author: gpuready
"""

EXAMPLES = r"""
- name: ESXi | Enable passthrough for the GPUs
  gpuready.gpu.esxi_passthrough:
    hostname: vcenter.lab.local
    username: administrator@vsphere.local
    esxi_host: r750xa-01.lab.local
    devices: ["0000:17:00.0", "0000:31:00.0"]
"""

RETURN = r"""
enabled: {description: Devices whose passthrough was (or would be) turned on., returned: always, type: list}
not_active:
  description: Devices enabled but not active yet (older ESXi activates them at the next reboot).
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuready.gpu.plugins.module_utils.vsphere import CONNECTION_SPEC, fail, require_gpuready, session


def main():
    module = AnsibleModule(
        argument_spec=dict(esxi_host=dict(type="str", required=True),
                           devices=dict(type="list", elements="str", required=True), **CONNECTION_SPEC),
        supports_check_mode=True)
    require_gpuready(module)
    from pyVmomi import vim

    from gpuready.core.errors import BadInput
    from gpuready.core.vsphere import find_host, pci_devices, translate

    name = module.params["esxi_host"]
    try:
        with session(module) as si:
            host = find_host(si, name)
            devices = pci_devices(host)
            for address in module.params["devices"]:
                if address not in devices:
                    raise BadInput("%s: no PCI device %s" % (name, address))
                if not devices[address].passthru_capable:
                    raise BadInput("%s: %s (%s) cannot be passed through (enable VT-d/IOMMU in the BIOS)"
                                   % (name, address, devices[address].name))
            todo = [a for a in module.params["devices"] if not devices[a].passthru_enabled]
            if todo and not module.check_mode:
                config = [vim.host.PciPassthruConfig(id=a, passthruEnabled=True) for a in todo]
                try:
                    host.configManager.pciPassthruSystem.UpdatePassthruConfig(config=config)
                except Exception as e:  # noqa: BLE001 - translated into one line
                    raise translate(e, "%s: enabling passthrough" % name) from e
                devices = pci_devices(host)
    except Exception as e:  # noqa: BLE001 - every error becomes one failure line
        fail(module, e)
    not_active = [a for a in module.params["devices"] if not module.check_mode and not devices[a].passthru_active]
    result = dict(changed=bool(todo), enabled=todo, not_active=not_active)
    if module._diff:
        result["diff"] = dict(before="".join("%s passthrough: false\n" % a for a in todo),
                              after="".join("%s passthrough: true\n" % a for a in todo))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
