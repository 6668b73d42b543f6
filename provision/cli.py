"""``gpuready provision``: everything that changes machines, run by Ansible."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuready.core.command import Context, comma_list, common_options, execute, limit_option
from gpuready.core.results import RunResult

if TYPE_CHECKING:
    from gpuready.core.errors import Unreachable
    from gpuready.core.inventory import Inventory
    from gpuready.core.runner import StepTimedOut

SITE = "site.yml"


@click.group()
def provision() -> None:
    """Provision GPU nodes, Kubernetes/OpenShift and vSphere (Ansible does every change)."""


@provision.command("cluster")
@common_options
@limit_option
@click.option("--check", is_flag=True, help="Plan only: report what would change, change nothing.")
@click.option(
    "--diff",
    is_flag=True,
    help="Show the before/after of each change, per task, hosts with the same change grouped (all of them in "
    "diffs.txt in the run folder).",
)
@click.option(
    "--tags",
    default=None,
    metavar="LIST",
    callback=comma_list,
    help="Only these layers (comma-separated site.yml tags).",
)
@click.option("--allow-power-off", is_flag=True, help="vSphere: power off VMs whose GPU changes need it (then on).")
@click.option("--insecure", is_flag=True, help="vSphere: do not verify vCenter's TLS certificate (labs only).")
@click.option(
    "--remove",
    is_flag=True,
    help="Undo: restore runtime configs from backup, drop SELinux rules and SSH keys (driver only if set); "
    "Kubernetes: delete the device plugin and SCC, take away gpuready's node labels.",
)
def cluster(
    inventory_path: Path,
    artifacts: Path | None,
    verbose: int,
    limit: str | None,
    check: bool,
    diff: bool,
    tags: list[str] | None,
    allow_power_off: bool,
    insecure: bool,
    remove: bool,
) -> None:
    """Run playbooks/site.yml against the inventory: preflight, then each layer behind its tag."""
    options = {
        "limit": limit,
        "check": check,
        "diff": diff,
        "tags": tags,
        "allow_power_off": allow_power_off,
        "insecure": insecure,
        "remove": remove,
    }
    execute(Context("provision cluster", inventory_path, artifacts, verbose, options), _cluster)


def _cluster(ctx: Context) -> RunResult:
    from gpuready.core.errors import Cancelled
    from gpuready.core.inventory import KUBE_ONLY_GROUP
    from gpuready.core.platforms.vsphere_plan import provision_extra_vars
    from gpuready.core.runner import PlaybookRun, StepTimedOut, check_tags, playbooks_dir, run_playbook
    from gpuready.provision.playbook_results import add_playbook_run

    opts = ctx.options
    inv = ctx.inventory
    if opts["tags"]:
        check_tags(playbooks_dir() / SITE, opts["tags"])
    hosts = inv.limit(opts["limit"])  # refuses a pattern that matches no host, before Ansible starts

    # The vSphere plan is made and checked here, so a bad one is refused before anything changes.
    extra_vars = provision_extra_vars(
        inv,
        tags=opts["tags"],
        limit=opts["limit"],
        insecure=opts["insecure"],
        allow_power_off=opts["allow_power_off"],
        note=ctx.note,
    )
    if any(KUBE_ONLY_GROUP in groups for groups in inv.host_groups.values()):
        # The host layers' plays (site.yml: gpuready_os_hosts) leave out nodes reached only through the API.
        extra_vars = {**(extra_vars or {}), "gpuready_os_hosts": f"gpu_nodes:!{KUBE_ONLY_GROUP}"}
    if inv.settings.kubernetes.kubeconfig:
        # Resolved when the inventory was loaded; the inventory's own value may be relative to it.
        extra_vars = {**(extra_vars or {}), "gpuready_kubeconfig": inv.settings.kubernetes.kubeconfig}
    _reach_kubernetes(inv, hosts, opts["tags"])
    skip_tags = None
    if opts["remove"]:
        # The same plays undo what they added; preflight is skipped so a degraded node can still be cleaned.
        extra_vars = {**(extra_vars or {}), "gpuready_state": "absent"}
        skip_tags = ["preflight"]
    result = ctx.new_result()
    result.metrics["check_mode"] = opts["check"]
    plan = (extra_vars or {}).get("gpuready_vsphere_plan", {}).get("plan")
    if plan:
        # Ansible reaches vCenter from one host; what the run provisions is the plan's ESXi hosts and VMs.
        result.metrics["vsphere"] = {"hosts": len(plan["hosts"]), "vms": len(plan["vms"])}
    ctx.note(
        f"provision cluster: {inv.path} ({'check mode, nothing will change' if opts['check'] else 'apply'})"
        f" — artifacts in {ctx.run_dir}"
    )
    try:
        run = run_playbook(
            SITE,
            inv.path,
            ctx.run_dir,
            check=opts["check"],
            diff=opts["diff"],
            limit=opts["limit"],
            tags=opts["tags"],
            progress=ctx.progress,
            extra_vars=extra_vars,
            skip_tags=skip_tags,
            # The vSphere play's steps are bounded (gpuready.vsphere.step_timeout_s): one that runs out means vCenter
            # stopped answering, and every later step would wait for it again.
            stop_on_timeout=inv.hosts("vcenter"),
        )
    except Cancelled as e:
        if isinstance(e.partial, PlaybookRun):
            add_playbook_run(result, e.partial, check_mode=opts["check"], hosts=hosts)
        e.partial = result
        raise
    except StepTimedOut as e:
        if isinstance(e.partial, PlaybookRun):
            add_playbook_run(result, e.partial, check_mode=opts["check"], hosts=hosts)
        raise _timed_out(inv, e, result) from e
    add_playbook_run(result, run, check_mode=opts["check"], hosts=hosts)
    if opts["diff"]:
        from gpuready.provision import diff_report

        ctx.stop_progress()
        diff_report.show(ctx.console, run, ctx.run_dir, check_mode=opts["check"])
    return result


def _timed_out(inv: Inventory, e: StepTimedOut, result: RunResult) -> Unreachable:
    """One line for a run stopped at a step that timed out, the results (what changed before) attached: on the
    vCenter host it names the vCenter and its setting, since the vSphere play's steps are bounded by it."""
    from gpuready.core.errors import Unreachable
    from gpuready.core.platforms import vsphere_plan

    t = e.timed_out
    changed = result.metrics.get("changed", 0)
    applied = f"; {changed} change(s) applied before it stopped are in the results" if changed else ""
    if t.host in inv.hosts("vcenter"):
        message = (
            f"vCenter {vsphere_plan.where(inv, t.host)} stopped answering during {t.task!r}: no answer within "
            f"{t.seconds}s (gpuready.vsphere.step_timeout_s){applied}"
        )
    else:
        message = f"{t.host}: {t.task!r} did not finish within {t.seconds}s (its timeout){applied}"
    error = Unreachable(message)
    error.partial = result  # type: ignore[attr-defined]
    return error


def _reach_kubernetes(inv: Inventory, hosts: list[str], tags: list[str] | None) -> None:
    """The Kubernetes play reaches the API from here (``connection: local``), as validate does: reach it first,
    so a kubeconfig, credential or TLS problem (a wrong CA) is one line and exit 3 before Ansible starts, never
    a failed task that reads like a finding about the cluster."""
    if (tags and "kubernetes" not in tags) or not set(inv.hosts("kube_control_plane")) & set(hosts):
        return
    from kubernetes.client import VersionApi

    from gpuready.core.platforms import kube

    api = kube.connect(inv.settings.kubernetes)
    api.call(lambda: VersionApi(api.api_client).get_code(), "read its version")
