"""Turn a playbook run into checks of the results model: per-host outcome plus role findings."""

from __future__ import annotations

from collections.abc import Sequence

from gpuready.core.results import RunResult, errored, failed, passed
from gpuready.core.runner import HostResult, PlaybookRun

#: Changed tasks named in a stopped host's message; the evidence has them all.
NAMED_CHANGES = 3


def changes_so_far(r: HostResult, verb: str) -> str:
    """``N ok, M changed so far``, and which tasks changed: a stopped or failed run's changes are applied all the
    same."""
    text = f"{r.ok} ok, {r.changed} {verb} so far"
    if r.changed_tasks:
        named = "; ".join(r.changed_tasks[:NAMED_CHANGES])
        more = f" (+{len(r.changed_tasks) - NAMED_CHANGES} more)" if len(r.changed_tasks) > NAMED_CHANGES else ""
        text += f": {named}{more}"
    return text


def add_playbook_run(result: RunResult, run: PlaybookRun, *, check_mode: bool, hosts: Sequence[str] = ()) -> None:
    """``hosts``: the hosts the run was meant for; after a cancel or a stop, those it never reached are marked."""
    verb = "would change" if check_mode else "changed"
    stop = "cancelled" if run.cancelled else "stopped (a task timed out)"
    if run.stopped:
        for host in hosts:
            if host not in run.hosts:
                result.add(errored("provision.apply", host, f"{stop} before the playbook reached this host"))
    for host, r in sorted(run.hosts.items()):
        result.add(*r.checks)
        if run.timed_out and run.timed_out.host == host:
            # What the task waited for stopped answering: not a finding about the machines (exit 3, not 1).
            result.add(
                errored(
                    "provision.reach",
                    host,
                    f"{run.timed_out.task!r} got no answer within {run.timed_out.seconds}s and the run stopped "
                    f"there; {changes_so_far(r, verb)}",
                    evidence="\n".join(r.changed_tasks),
                    remedy="find out why it stopped answering, then run provision cluster again to finish "
                    "(it is idempotent)",
                )
            )
            continue
        if r.unreachable:
            result.add(
                errored(
                    "provision.reach",
                    host,
                    f"unreachable: {r.unreachable_message or 'no answer'}",
                    remedy="check the address, SSH access and credentials in the inventory",
                )
            )
            continue
        if r.tls_failure:
            # The machines were never reached: not a finding about them (exit 3, not 1).
            result.add(
                errored(
                    "provision.reach",
                    host,
                    f"TLS certificate did not verify: {r.tls_failure}",
                    remedy="check the CA the inventory names (gpuready.vsphere.ca_file, the kubeconfig's "
                    "certificate-authority) and the server's certificate",
                )
            )
            continue
        if r.failed_tasks:
            task, message = r.failed_tasks[0]
            more = f" (+{len(r.failed_tasks) - 1} more)" if len(r.failed_tasks) > 1 else ""
            evidence = "\n".join(f"{t}: {m}" for t, m in r.failed_tasks)
            # What changed before the failure is applied all the same (a loop's earlier items included).
            applied = f"; {changes_so_far(r, verb)}" if r.changed_tasks else ""
            evidence += "".join(f"\n{verb}: {t}" for t in r.changed_tasks)
            result.add(
                failed(
                    "provision.apply",
                    host,
                    f"{task}: {message}{more}{applied}",
                    evidence=evidence,
                    remedy=f"see {run.artifacts} for the full Ansible output",
                )
            )
            continue
        if any(c.status == "failed" for c in r.checks):
            continue  # a role stopped this host and said why in its findings
        if run.stopped:
            result.add(
                errored(
                    "provision.apply",
                    host,
                    f"{stop} before the playbook finished: {changes_so_far(r, verb)}",
                    evidence="\n".join(r.changed_tasks),
                    remedy="run provision cluster again to finish (it is idempotent)",
                )
            )
            continue
        result.add(
            passed("provision.apply", host, f"{r.ok} ok, {r.changed} {verb}", evidence="\n".join(r.changed_tasks))
        )
    result.metrics.setdefault("playbooks", []).append(
        {
            "playbook": run.playbook,
            "status": run.status,
            "check_mode": check_mode,
            "changed": {h: r.changed for h, r in sorted(run.hosts.items())},
            "changed_tasks": {h: r.changed_tasks for h, r in sorted(run.hosts.items()) if r.changed_tasks},
        }
    )
    result.metrics["changed"] = result.metrics.get("changed", 0) + run.changed
