# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The one channel through which the roles report findings: appends them to the fact gpuready_checks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.six import string_types
from ansible.plugins.action import ActionBase

FACT = "gpuready_checks"
STATUSES = ("passed", "failed", "skipped", "error")
FIELDS = ("id", "status", "message", "evidence", "remedy", "host")


def checked(findings):
    if not isinstance(findings, list):
        raise AnsibleActionFail("findings: expected a list of findings, got %s" % type(findings).__name__)
    out = []
    for n, item in enumerate(findings):
        if not isinstance(item, dict) or not isinstance(item.get("id"), string_types) or not item["id"]:
            raise AnsibleActionFail("findings[%d]: each finding is a dict with an id" % n)
        if item.get("status") not in STATUSES:
            raise AnsibleActionFail("findings[%d] (%s): status %r is not one of %s"
                                    % (n, item["id"], item.get("status"), ", ".join(STATUSES)))
        unknown = sorted(set(item) - set(FIELDS))
        if unknown:
            raise AnsibleActionFail("findings[%d] (%s): unknown key(s) %s" % (n, item["id"], ", ".join(unknown)))
        out.append(dict((k, item.get(k, "")) for k in FIELDS if k != "host" or item.get("host")))
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("findings",))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        findings = checked(self._task.args.get("findings"))
        # Facts live under ansible_facts (gpuready runs Ansible without injecting them as variables).
        earlier = ((task_vars or {}).get("ansible_facts") or {}).get(FACT) or []
        result.update(changed=False, findings=findings, ansible_facts={FACT: list(earlier) + findings})
        return result
