#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vsphere_plan
short_description: Make gpuready's GPU passthrough plan from the settings and vCenter's hosts
description:
  - Reads the ESXi hosts' PCI devices and the VMs from vCenter and computes which GPUs go to which VM,
    the NVLink pairing and the 64-bit MMIO size, with gpuready.core.platforms.vsphere_plan.
  - Fails, with one line saying why, on a plan that splits an NVLink pair, attaches a GPU twice, exceeds
    the per-VM limit, or names an unknown host, VM or device. Changes nothing.
options:
  settings:
    description: The C(gpuready.vsphere) settings section.
    type: dict
    required: true
  esxi_hosts:
    description: The inventory's esxi_hosts group.
    type: list
    elements: str
    required: true
extends_documentation_fragment: [gpuready.gpu.vsphere]
author: gpuready
"""

EXAMPLES = r"""
- name: VMware | Make the GPU passthrough plan
  gpuready.gpu.vsphere_plan:
    hostname: vcenter.lab.local
    username: administrator@vsphere.local
    settings: "{{ gpuready.vsphere }}"
    esxi_hosts: "{{ groups['esxi_hosts'] }}"
"""

RETURN = r"""
plan:
  description: Hosts (GPUs to pass through) and VMs (GPUs, NVLink pair, MMIO size, extra config).
  returned: success
  type: dict
lines:
  description: The plan, one line per host and VM.
  returned: success
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuready.gpu.plugins.module_utils.vsphere import CONNECTION_SPEC, fail, require_gpuready, session


def main():
    module = AnsibleModule(
        argument_spec=dict(settings=dict(type="dict", required=True),
                           esxi_hosts=dict(type="list", elements="str", required=True), **CONNECTION_SPEC),
        supports_check_mode=True)
    require_gpuready(module)
    from pydantic import ValidationError

    from gpuready.core.settings import Vsphere
    from gpuready.core.platforms.vsphere_plan import read_plan

    try:
        settings = Vsphere.model_validate(module.params["settings"])
    except ValidationError as e:
        module.fail_json(msg="gpuready.vsphere: %s" % e.errors()[0]["msg"])
    try:
        with session(module) as si:
            plan = read_plan(si, settings, module.params["esxi_hosts"], provisioning=True)
    except Exception as e:  # noqa: BLE001 - every error becomes one failure line
        fail(module, e)
    module.exit_json(changed=False, plan=plan.to_dict(), lines=plan.lines())


if __name__ == "__main__":
    main()
