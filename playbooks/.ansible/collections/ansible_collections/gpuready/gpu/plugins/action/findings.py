# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The one channel through which the roles report findings: appends them to the fact gpuready_checks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.errors import AnsibleActionFail
from ansible.module_utils.six import string_types
from ansible.plugins.action import ActionBase

FACT = "gpuready_checks"
STATUSES = ("passed", "failed", "skipped", "error", "pending")
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


def plain(findings):
    """The findings as plain JSON data, without the tags Ansible puts on templated values (origin, trust).

    The fact cache keeps facts serialised, and every task decodes its host's facts again to build its
    variables; a tagged value costs far more to decode than a plain one (ansible-core 2.19's tag
    deserialisation resolves type hints per value). Findings only grow during a run, so with their tags
    they took about a quarter of the controller's time in a provisioning run that changed nothing.
    """
    return json.loads(json.dumps(findings))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("findings",))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        findings = plain(checked(self._task.args.get("findings")))
        # Facts live under ansible_facts (gpuready runs Ansible without injecting them as variables).
        earlier = ((task_vars or {}).get("ansible_facts") or {}).get(FACT) or []
        result.update(changed=False, findings=findings, ansible_facts={FACT: list(earlier) + findings})
        return result
