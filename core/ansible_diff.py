"""The before/after of a changed task (``--diff``), as Ansible's own callbacks print it.

A module run with diff on returns ``diff``: a dict, or a list of them, with ``before``/``after`` (text, or a
structure shown as JSON) and their headers, or ``prepared`` text, or why it was left out (a binary or large
file). A loop task has one per item. This is the text Ansible's CallbackBase._get_diff makes of them
(ansible-core, lib/ansible/plugins/callback/__init__.py), without colour.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

#: Lines of context around each change, Ansible's DIFF_CONTEXT default.
CONTEXT = 3


def of_result(res: Mapping[str, Any]) -> str:
    """The diff text of a task's result: its own ``diff`` and each changed loop item's."""
    parts = []
    if res.get("diff"):
        parts.append(as_text(res["diff"]))
    for item in res.get("results") or []:
        if isinstance(item, Mapping) and item.get("changed") and item.get("diff"):
            parts.append(as_text(item["diff"]))
    return "".join(parts)


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
            before, after = (_as_file(diff[k]) for k in ("before", "after"))
            lines = list(
                difflib.unified_diff(
                    _lines(before),
                    _lines(after),
                    fromfile=f"before: {diff['before_header']}" if "before_header" in diff else "before",
                    tofile=f"after: {diff['after_header']}" if "after_header" in diff else "after",
                    n=CONTEXT,
                )
            )
            out += lines
            if lines:
                out.append("\n")
        if diff.get("prepared"):
            out.append(str(diff["prepared"]))
    return "".join(out)


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
