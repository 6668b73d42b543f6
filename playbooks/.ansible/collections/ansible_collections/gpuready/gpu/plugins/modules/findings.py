#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# The documentation of the action plugin plugins/action/findings.py, which does the work on the controller.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: findings
short_description: Report a role's findings as checks
description:
  - Appends the findings to the host's fact C(gpuready_checks), the one channel between the roles and whoever
    runs them (gpuready turns each into a check of its results). Validates each finding first.
  - Runs on the controller; changes nothing on the host. Supports check mode.
options:
  findings:
    description: The findings, each with C(id), C(status) (passed, failed, skipped, error, pending), C(message),
      C(evidence) and C(remedy); optionally C(host), the machine the finding is about when it is not the
      inventory host the task ran for (a Kubernetes node marked from the control plane host).
    type: list
    elements: dict
    required: true
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
author: gpuready
"""

EXAMPLES = r"""
- name: Preflight | Report the findings
  gpuready.gpu.findings:
    findings: "{{ preflight_findings }}"
"""

RETURN = r"""
findings: {description: The findings as reported., returned: always, type: list, elements: dict}
"""
