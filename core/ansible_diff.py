"""The before/after of a changed task (``--diff``), as Ansible's own callbacks print it.

A module run with diff on returns ``diff``: a dict, or a list of them, with ``before``/``after`` (text, or a
structure shown as JSON) and their headers, or ``prepared`` text, or why it was left out (a binary or large
file). A loop task has one per item, and kubernetes.core.k8s given several definitions one per definition
(under ``result.results``, kubernetes.core plugins/module_utils/k8s/runner.py run_module). This is the text
Ansible's CallbackBase._get_diff makes of them (ansible-core, lib/ansible/plugins/callback/__init__.py),
without colour, with one difference: the lists of a structure are compared sorted, so that a list the
module built in no set order (community.vmware.vmware_host_passthrough de-duplicates its devices through a
set) does not read as a change; only when the sorted structures are equal is the order itself shown.

The modules that change vSphere settings but return no ``diff`` have their before/after built here from
what they do return (:data:`BUILT`), never from anything else.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

#: Lines of context around each change, Ansible's DIFF_CONTEXT default.
CONTEXT = 3


def of_result(res: Mapping[str, Any], action: str = "") -> str:
    """The diff text of a task's result (``action``: the module that ran): its own ``diff``, each changed loop
    item's, and each changed k8s definition's."""
    parts = [_one(res, action)]
    for item in res.get("results") or []:
        if isinstance(item, Mapping) and item.get("changed"):
            parts.append(_one(item, action, str(item.get("_ansible_item_label") or "")))
    nested = res.get("result")
    for each in (nested.get("results") or []) if isinstance(nested, Mapping) else []:
        if isinstance(each, Mapping) and each.get("changed"):
            parts.append(_one(each, action, _object(each.get("result"))))
    return "".join(parts)


def _object(obj: Any) -> str:
    """Which Kubernetes object a k8s result is: ``Kind namespace/name``."""
    if not isinstance(obj, Mapping):
        return ""
    meta = obj.get("metadata") or {}
    name = "/".join(str(part) for part in (meta.get("namespace"), meta.get("name")) if part)
    return f"{obj.get('kind', '')} {name}".strip()


def _one(res: Mapping[str, Any], action: str, label: str = "") -> str:
    """One result's diff; without headers of its own, headed by ``label`` (a loop item's: which ESXi host; a
    k8s definition's: which object)."""
    if res.get("diff"):
        diff = res["diff"]
        if label and isinstance(diff, Mapping) and "before_header" not in diff and "after_header" not in diff:
            diff = {**diff, "before_header": label, "after_header": label}
        return as_text(diff)
    build = BUILT.get(action)
    # A loop task's own result only sums up its items (each built on its own).
    if build is None or not res.get("changed") or "results" in res:
        return ""
    return as_text(build(res))


def _advanced_settings(res: Mapping[str, Any]) -> dict[str, str]:
    """vmware.vmware.vm_advanced_settings returns ``updated_settings``: each changed key's ``old`` and ``new``
    value, ``None`` where the VM has no such setting (plugins/modules/vm_advanced_settings.py)."""
    changes = res.get("updated_settings") or {}
    vm = (res.get("vm") or {}).get("name", "")

    def text(side: str) -> str:
        values = {key: change.get(side) for key, change in changes.items() if isinstance(change, Mapping)}
        return "".join(f"{key} = {value}\n" for key, value in sorted(values.items()) if value is not None)

    return {"before": text("old"), "after": text("new"), "before_header": vm, "after_header": vm}


def _host_options(res: Mapping[str, Any]) -> dict[str, str]:
    """community.vmware.vmware_host_config_manager returns only ``msg`` naming the options it changed ("A, B,
    and C would be changed.", plugins/modules/vmware_host_config_manager.py) and its arguments, the values
    wanted. The value before is not returned: for a boolean option (ATS) it is the other boolean, since the
    module changes a BoolOption only when it differs; for any other it is shown as not the value wanted."""
    args = (res.get("invocation") or {}).get("module_args") or {}
    wanted = args.get("options") or {}
    named = re.sub(r" (would be )?changed\.$", "", str(res.get("msg", "")))
    changed = {key.strip() for key in re.split(r",? and |, ", named)}
    before, after = [], []
    for key, value in sorted(wanted.items()):
        if key in changed:
            before.append(f"{key} = {_shown(not value) if isinstance(value, bool) else f'(not {_shown(value)})'}\n")
            after.append(f"{key} = {_shown(value)}\n")
    host = str(args.get("esxi_hostname") or args.get("cluster_name") or "")
    return {"before": "".join(before), "after": "".join(after), "before_header": host, "after_header": host}


def _shown(value: Any) -> str:
    """A value as vSphere's clients print it (booleans lower case)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


#: Module -> the before/after built from its result, for the modules that return no ``diff``.
BUILT: dict[str, Callable[[Mapping[str, Any]], dict[str, str]]] = {
    "vmware.vmware.vm_advanced_settings": _advanced_settings,
    "community.vmware.vmware_host_config_manager": _host_options,
}


def as_text(diffs: Any) -> str:
    out: list[str] = []
    for diff in diffs if isinstance(diffs, list) else [diffs]:
        if not isinstance(diff, Mapping):
            continue
        for key, what in (("dst_binary", "destination"), ("src_binary", "source")):
            if key in diff:
                out.append(f"diff skipped: {what} file appears to be binary\n")
        for key, what in (("dst_larger", "destination"), ("src_larger", "source")):
            if key in diff:
                out.append(f"diff skipped: {what} file size is greater than {diff[key]}\n")
        if "before" in diff and "after" in diff:
            headers = {
                "fromfile": f"before: {diff['before_header']}" if "before_header" in diff else "before",
                "tofile": f"after: {diff['after_header']}" if "after_header" in diff else "after",
            }
            lines = _unified(sorted_lists(diff["before"]), sorted_lists(diff["after"]), headers)
            if not lines:
                lines = _unified(diff["before"], diff["after"], headers)
            out += lines
            if lines:
                out.append("\n")
        if diff.get("prepared"):
            out.append(str(diff["prepared"]))
    return "".join(out)


def sorted_lists(value: Any) -> Any:
    """``value`` with every list in it sorted (its items compared as JSON), so that two structures whose
    lists hold the same items in another order are equal."""
    if isinstance(value, Mapping):
        return {key: sorted_lists(item) for key, item in value.items()}
    if isinstance(value, list):
        items = [sorted_lists(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=str))
    return value


def _unified(before: Any, after: Any, headers: dict[str, str]) -> list[str]:
    return list(difflib.unified_diff(_lines(_as_file(before)), _lines(_as_file(after)), n=CONTEXT, **headers))


def _as_file(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping | list):
        return json.dumps(value, sort_keys=True, indent=4, separators=(",", ": ")) + "\n"
    return str(value)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
