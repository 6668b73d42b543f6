# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# The connection options every gpuready.gpu vSphere module takes (module_utils/vsphere.py CONNECTION_SPEC).

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  hostname: {description: vCenter or ESXi address., type: str, required: true}
  port: {description: HTTPS port., type: int, default: 443}
  username: {description: User to log in as., type: str, required: true}
  password: {description: Password; default is the environment variable named by I(password_env)., type: str}
  password_env: {description: Environment variable holding the password., type: str, default: GPUREADY_VCENTER_PASSWORD}
  validate_certs: {description: Verify the TLS certificate., type: bool, default: true}
  ca_file: {description: PEM file of the CA to trust., type: str, default: ""}
  task_timeout: {description: Seconds to wait for one vSphere task., type: int, default: 600}
"""
