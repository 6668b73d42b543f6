"""Act on the node checks in Kubernetes: label the nodes that passed, taint those that failed.

Python works out each node's verdict; the change itself is Ansible's (playbooks/node_marks.yml, role
node_validation_marks: one server-side apply under a field manager of its own, so a node that passes
later loses the taint and nothing another manager set is touched).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput
from gpuready.core.platforms.node_condition import label_value
from gpuready.core.results import ERROR, FAILED, Check, RunResult, errored, skipped

PLAYBOOK = "node_marks.yml"
CHECK_ID = "kubernetes.node_marks"


def verdicts(checks: Iterable[Check], date: dt.date) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per host: passed, or failed with the failed check ids. A host whose checks could not run (unreachable,
    timed out) but found no failure is left out, with its name in the second list: nothing is known of it."""
    failures: dict[str, list[str]] = {}
    errors: set[str] = set()
    for c in checks:
        failures.setdefault(c.host, [])
        if c.status == FAILED and c.id not in failures[c.host]:
            failures[c.host].append(c.id)
        elif c.status == ERROR:
            errors.add(c.host)
    marks: dict[str, dict[str, Any]] = {}
    unknown = []
    for host, failed_ids in failures.items():
        if failed_ids:
            marks[host] = {
                "result": "failed",
                "date": date.isoformat(),
                "failed_checks": failed_ids,
                "taint_value": label_value(failed_ids[0]),
            }
        elif host in errors:
            unknown.append(host)
        else:
            marks[host] = {"result": "passed", "date": date.isoformat(), "failed_checks": []}
    return marks, sorted(unknown)


def control_plane(inventory: Any) -> str:
    hosts = inventory.hosts("kube_control_plane")
    if not hosts:
        raise BadInput(
            f"{inventory.path}: --mark-nodes needs a host in group kube_control_plane "
            "(where the Kubernetes API is reached from)"
        )
    return str(hosts[0])


def mark(
    result: RunResult, inventory: Any, run_dir: Path, *, check: bool, progress: Callable[[Any], None] | None = None
) -> None:
    """Mark the nodes of ``result`` in Kubernetes (``check``: a server-side dry run) and add one
    ``kubernetes.node_marks`` row per node. A run that could not apply its marks aborts the result."""
    from gpuready.core.runner import run_playbook

    where = control_plane(inventory)
    marks, unknown = verdicts(result.checks, dt.datetime.now(dt.timezone.utc).date())
    result.add(
        *(
            skipped(
                CHECK_ID, h, "not marked: its checks could not run (see its errors); its marks are left as they were"
            )
            for h in unknown
        )
    )
    if not marks:
        return
    extra_vars: dict[str, Any] = {"gpuready_node_verdicts": marks}
    if inventory.settings.kubernetes.kubeconfig:
        extra_vars["gpuready_kubeconfig"] = inventory.settings.kubernetes.kubeconfig
    run = run_playbook(
        PLAYBOOK,
        inventory.path,
        run_dir / "node-marks",
        check=check,
        limit=where,
        extra_vars=extra_vars,
        progress=progress,
    )
    outcome = run.hosts.get(where)
    rows = outcome.checks if outcome else []
    result.add(*rows)
    changed = [c.host for c in rows if c.message.endswith(("(changed)", "(would change)"))]
    result.metrics["node_marks"] = {"check_mode": check, "changed": len(changed)}
    if outcome is None or outcome.unreachable or outcome.failed_tasks or run.status != "successful":
        why = (
            outcome.failed_tasks[0][1]
            if outcome and outcome.failed_tasks
            else outcome.unreachable_message
            if outcome and outcome.unreachable
            else run.status
        )
        result.add(
            errored(
                CHECK_ID,
                where,
                f"marking the nodes failed: {why}",
                remedy=f"see {run.artifacts} for the Ansible output; the RBAC gpuready needs is in "
                "kube_rbac.yaml (get, list and patch nodes)",
            )
        )
        result.aborted = f"--mark-nodes: {why}"
