"""A node verdict as Kubernetes sees it: a node condition that says why, and the opt-in taint that says bad.

The condition is of the problem kind, as node-problem-detector's are (``KernelDeadlock``; its
``types.Condition``: "the condition of node in problem") and as the kubelet's own pressure conditions
are: ``True`` means a gpuready check failed, ``False`` that the checks passed. Its reason is the first
failed check id in CamelCase (reasons are one CamelCase word, the API conventions' rule for
``metav1.Condition``); its message names the check id verbatim, its message and its remedy, the same
words as the Slurm drain reason and the report.

The taint is the one ``validate gpu-node --mark-nodes`` sets (``<prefix>/validation-failed=<check
id>:NoSchedule``, the prefix from the node_validation_marks role's defaults), and it is opt-in here too.
Both are cleared when the checks pass again. A verdict whose checks could not run (errors, nothing
failed) changes neither: unknown is not failed, and it is not passed either.

Patched with the kubernetes client, not Ansible, because the periodic checks run inside a pod on the
node, where there is no control host to run a play from. The condition is a strategic merge patch of
``nodes/status`` keyed by the condition type, so the kubelet's and other tools' conditions are untouched;
the taint is an RFC 6902 patch that first tests the taint list it read (nothing another manager added
meanwhile is lost).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuready.core import role_defaults
from gpuready.core.errors import BadInput
from gpuready.core.results import ERROR, FAILED, PASSED

if TYPE_CHECKING:
    from gpuready.core.platforms.kube import Kube

CONDITION_TYPE = "GpureadyCheckFailed"
PASSED_REASON = "ChecksPassed"
#: The field manager named in the node's managedFields for what this module writes.
FIELD_MANAGER = "gpuready-node-checks"
#: A condition message is free text; kept to what ``kubectl describe node`` shows on a few lines.
MESSAGE_LIMIT = 1024
#: A label (and taint) value: at most 63 characters, alphanumerics and -_. inside, alphanumeric at both ends.
_NOT_IN_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")
_WORD = re.compile(r"[A-Za-z0-9]+")


def label_value(text: str) -> str:
    """``text`` as a valid Kubernetes label value (the rules of k8s.io/apimachinery's IsValidLabelValue)."""
    return _NOT_IN_VALUE.sub("-", text)[:63].strip("-_.")


def taint_key() -> str:
    """gpuready's failure taint, as the node_validation_marks role writes it."""
    prefix = role_defaults.role_default("node_validation_marks", "node_validation_marks_prefix")
    return f"{prefix}/validation-failed"


def reason(check_id: str) -> str:
    """A check id as a condition reason: ``gpu.ecc_volatile`` -> ``GpuEccVolatile``. The API conventions'
    reason is one CamelCase word (``metav1.Condition``: ``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$``)."""
    words = _WORD.findall(check_id)
    camel = "".join(w[:1].upper() + w[1:] for w in words)
    if not camel or not camel[0].isalpha():
        camel = "Check" + camel
    return camel[:1024]


@dataclass(frozen=True)
class Judgement:
    """What a node verdict means for the node: failed (with the first failed check), passed, or unknown."""

    state: str  # "failed", "passed" or "unknown"
    check_id: str = ""
    message: str = ""

    @property
    def condition_status(self) -> str:
        return "True" if self.state == "failed" else "False"

    @property
    def reason(self) -> str:
        return reason(self.check_id) if self.state == "failed" else PASSED_REASON


def judge(checks: list[dict[str, Any]]) -> Judgement:
    """The node's state from its checks (each with ``id``, ``status``, ``message``, ``remedy``)."""
    failed = [c for c in checks if c.get("status") == FAILED]
    if failed:
        first = failed[0]
        text = f"gpuready: {first['id']}: {first.get('message') or 'failed'}"
        if first.get("remedy"):
            text += f"; remedy: {first['remedy']}"
        others = sorted({str(c["id"]) for c in failed[1:]} - {str(first["id"])})
        if others:
            text += f"; also failed: {', '.join(others)}"
        return Judgement("failed", str(first["id"]), _cut(text))
    if any(c.get("status") == ERROR for c in checks):
        errored = next(c for c in checks if c.get("status") == ERROR)
        return Judgement("unknown", str(errored["id"]), _cut(f"gpuready: {errored['id']}: could not run"))
    passed = sum(c.get("status") == PASSED for c in checks)
    return Judgement("passed", "", f"gpuready: checks passed ({passed} passed, {len(checks) - passed} skipped)")


def _cut(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


@dataclass(frozen=True)
class Outcome:
    """What :func:`apply` did to one node, in words for a log line."""

    node: str
    judgement: Judgement
    condition_changed: bool
    taint_changed: bool

    def line(self) -> str:
        j = self.judgement
        if j.state == "unknown":
            return f"{self.node}: checks could not run ({j.message}); condition and taint left as they were"
        verb = "set" if self.condition_changed else "unchanged"
        text = f"{self.node}: condition {CONDITION_TYPE}={j.condition_status} reason {j.reason} ({verb})"
        if self.taint_changed:
            text += f"; taint {taint_key()} {'added' if j.state == 'failed' else 'removed'}"
        return text


def apply(
    kube: Kube, node: str, checks: list[dict[str, Any]], *, taint: bool, now: dt.datetime | None = None
) -> Outcome:
    """Bring ``node``'s condition (and, with ``taint``, gpuready's taint) in line with its checks.

    A node the API does not know is :class:`BadInput` (exit 2); a refused request is one
    :class:`Unreachable` line naming the verb and resource (exit 3). Taking away the taint when the checks
    pass happens whether or not ``taint`` is given, so turning the option off never strands a taint."""
    from gpuready.core.platforms.kube import NotFound

    judgement = judge(checks)
    try:
        current = kube.read(lambda **kw: kube.core.read_node(node, **kw), f"get nodes {node}")
    except NotFound as e:
        raise BadInput(f"node {node!r} is not a node of the Kubernetes cluster at {kube.server}") from e
    if judgement.state == "unknown":
        return Outcome(node, judgement, False, False)
    condition_changed = _set_condition(kube, node, current, judgement, now or dt.datetime.now(dt.timezone.utc))
    taint_changed = _set_taint(kube, node, current, judgement, add=taint)
    return Outcome(node, judgement, condition_changed, taint_changed)


def _set_condition(kube: Kube, node: str, current: Any, judgement: Judgement, now: dt.datetime) -> bool:
    conditions = (current.get("status") or {}).get("conditions") or []
    before = next((c for c in conditions if c.get("type") == CONDITION_TYPE), None)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    wanted = {
        "type": CONDITION_TYPE,
        "status": judgement.condition_status,
        "reason": judgement.reason,
        "message": judgement.message,
        "lastHeartbeatTime": stamp,
        # The transition time moves only when the status does (the API conventions' lastTransitionTime).
        "lastTransitionTime": before["lastTransitionTime"]
        if before and before.get("status") == judgement.condition_status and before.get("lastTransitionTime")
        else stamp,
    }
    changed = not before or any(before.get(k) != wanted[k] for k in ("status", "reason", "message"))
    body = {"status": {"conditions": [wanted]}}
    kube.read(
        lambda **kw: kube.core.patch_node_status(
            node,
            body,
            field_manager=FIELD_MANAGER,
            _content_type="application/strategic-merge-patch+json",
            **kw,
        ),
        f"patch nodes/status of node {node}",
    )
    return changed


def _set_taint(kube: Kube, node: str, current: Any, judgement: Judgement, *, add: bool) -> bool:
    key = taint_key()
    taints = (current.get("spec") or {}).get("taints")
    others = [t for t in taints or [] if t.get("key") != key]
    ours = [t for t in taints or [] if t.get("key") == key]
    if judgement.state == "failed":
        if not add:
            return False
        wanted = [*others, {"key": key, "value": label_value(judgement.check_id), "effect": "NoSchedule"}]
    else:
        if not ours:
            return False
        wanted = others
    if wanted == (taints or []):
        return False
    patch = (
        [{"op": "add", "path": "/spec/taints", "value": wanted}]
        if taints is None
        else [
            {"op": "test", "path": "/spec/taints", "value": taints},
            {"op": "replace", "path": "/spec/taints", "value": wanted},
        ]
    )
    # A failed test (someone changed the taints between our read and our write) is the API's 422: one line, exit 3.
    kube.read(
        lambda **kw: kube.core.patch_node(
            node, patch, field_manager=FIELD_MANAGER, _content_type="application/json-patch+json", **kw
        ),
        f"patch nodes {node} (its taints)",
    )
    return True
