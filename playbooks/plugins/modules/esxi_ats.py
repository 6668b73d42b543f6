#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: esxi_ats
short_description: Turn Address Translation Services (ATS) on or off on an ESXi host
description:
  - Sets the ESXi advanced option C(VMkernel.Boot.atsSupport) through the host's advanced option manager,
    as C(esxcli system settings kernel set -s atsSupport -v TRUE) would. GPU peer-to-peer between
    passthrough GPUs needs it.
  - It is a kernel boot option, so a change takes effect at the next host reboot; the module says so in
    I(reboot_required) and never reboots the host itself.
  - Supports check mode and diff.
options:
  esxi_host: {description: The ESXi host as vCenter names it., type: str, required: true}
  enabled: {description: ATS on (true) or off., type: bool, default: true}
extends_documentation_fragment: [gpuready.gpu.vsphere]
author: gpuready
"""

EXAMPLES = r"""
- name: ESXi | Turn ATS on
  gpuready.gpu.esxi_ats:
    hostname: vcenter.lab.local
    username: administrator@vsphere.local
    esxi_host: r750xa-01.lab.local
    enabled: true
"""

RETURN = r"""
before: {description: The option's value before., returned: always, type: bool}
after: {description: The option's value after (or that it would have in check mode)., returned: always, type: bool}
reboot_required:
  description: True when the value changed now; the host runs with the old value until it reboots.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuready.gpu.plugins.module_utils.vsphere import CONNECTION_SPEC, fail, require_gpuready, session


def as_bool(value):
    return str(value).strip().lower() in ("true", "1", "yes")


def main():
    module = AnsibleModule(
        argument_spec=dict(esxi_host=dict(type="str", required=True), enabled=dict(type="bool", default=True),
                           **CONNECTION_SPEC),
        supports_check_mode=True)
    require_gpuready(module)
    from pyVmomi import vim

    from gpuready.core.vsphere import ATS_OPTION, find_host, host_option, translate

    wanted = module.params["enabled"]
    name = module.params["esxi_host"]
    try:
        with session(module) as si:
            host = find_host(si, name)
            current = host_option(host, ATS_OPTION)
            before = as_bool(current) if current is not None else False
            changed = current is None or before != wanted
            if changed and not module.check_mode:
                # The option is a boolean on ESXi: send a boolean, not the string "true".
                try:
                    host.configManager.advancedOption.UpdateOptions(
                        changedValue=[vim.option.OptionValue(key=ATS_OPTION, value=wanted)])
                except Exception as e:  # noqa: BLE001 - translated into one line
                    raise translate(e, "%s: setting %s" % (name, ATS_OPTION)) from e
    except Exception as e:  # noqa: BLE001 - every error becomes one failure line
        fail(module, e)
    result = dict(changed=changed, before=before, after=wanted, reboot_required=changed)
    if module._diff:
        result["diff"] = dict(before="%s = %s\n" % (ATS_OPTION, before), after="%s = %s\n" % (ATS_OPTION, wanted),
                              before_header=name, after_header=name)
    if changed:
        result["msg"] = "%s %s %s on %s: takes effect when the host reboots" % (
            "would set" if module.check_mode else "set", ATS_OPTION, wanted, name)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
