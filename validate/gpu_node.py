"""``gpuready validate gpu-node``: the GPU node catalogue on every host of gpu_nodes, in parallel."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuready.core.command import Context, FiniteFloatRange, comma_list, common_options, execute, limit_option
from gpuready.core.inventory import KUBE_ONLY_GROUP
from gpuready.core.report.metrics import metrics_option
from gpuready.core.results import Check, RunResult

#: The host variable that names the NVLink domain (the GB200/GB300 NVL rack) a host belongs to.
NVLINK_DOMAIN_VAR = "gpuready_nvlink_domain"

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuready.core.inventory import Inventory
    from gpuready.core.settings import NodeClass
    from gpuready.validate.node.fanout import HostDone


@click.command("gpu-node")
@common_options
@metrics_option
@limit_option
@click.option("--workers", type=click.IntRange(1, 512), default=32, show_default=True, help="Hosts validated at once.")
@click.option(
    "--host-timeout",
    type=FiniteFloatRange(1, 3600),
    default=120,
    show_default=True,
    help="Seconds one host may take before it is reported as an error.",
)
@click.option(
    "--only",
    default=None,
    metavar="IDS",
    callback=comma_list,
    help="Only these check ids or families, e.g. gpu (comma-separated); the checks they depend on run too.",
)
@click.option(
    "--skip",
    default=None,
    metavar="IDS",
    callback=comma_list,
    help="Leave out these check ids or families (comma-separated), e.g. perf.nccl_allreduce or perf.",
)
@click.option(
    "--dcgm-level",
    type=click.IntRange(1, 4),
    default=None,
    help="dcgmi diag level for diag.dcgm (1 quick ... 4 extended; default node_checks.dcgm_level, 1).",
)
@click.option(
    "--mark-nodes",
    is_flag=True,
    help="Kubernetes: label nodes that passed gpuready.io/validated=<date>, taint nodes that failed "
    "gpuready.io/validation-failed=<check>:NoSchedule (removed when they pass), through Ansible.",
)
@click.option("--check", is_flag=True, help="With --mark-nodes: report what the marks would change, change nothing.")
@click.option(
    "--through",
    type=click.Choice(["ssh", "kubernetes"]),
    default="ssh",
    show_default=True,
    help="kubernetes: no SSH; a pod pinned to each GPU node runs the full catalogue there (`validate this-node`, "
    "image gpuready.kubernetes.node_checks_image) and gpuready reads its node verdict from the pod's log.",
)
def gpu_node(
    inventory_path: Path,
    artifacts: Path | None,
    verbose: int,
    limit: str | None,
    workers: int,
    host_timeout: float,
    only: list[str] | None,
    skip: list[str] | None,
    dcgm_level: int | None,
    mark_nodes: bool,
    check: bool,
    through: str,
) -> None:
    """Driver, GPUs, topology, a vector add and node settings on each GPU node (read-only unless --mark-nodes)."""
    options = {
        "limit": limit,
        "workers": workers,
        "host_timeout": host_timeout,
        "mark_nodes": mark_nodes,
        "check": check,
        "only": only,
        "skip": skip,
        "dcgm_level": dcgm_level,
        "through": through,
    }
    execute(Context("validate gpu-node", inventory_path, artifacts, verbose, options), _gpu_node)


#: Failing hosts named in a progress line of their own; later ones are counted in the quarter-of-run lines, so a
#: fleet failing everywhere (a bad driver pushed to all) gives a few lines, not a line per host: the run's lines
#: on stderr and its verdict share one screen (core/report/terminal.py's MAX_LINES).
FAILING_LINES = 3


def worth_a_line(event: HostDone, failing_so_far: int = 0) -> bool:
    """A progress line per host is noise beside the verdict: the first failing hosts and each quarter of the run
    (its last host too) get one (``-v``: every host). ``failing_so_far`` counts ``event``'s host when it fails."""
    named = bool(event.failing) and failing_so_far <= FAILING_LINES
    return named or event.done * 4 // event.total > (event.done - 1) * 4 // event.total


def _gpu_node(ctx: Context) -> RunResult:
    import time

    from gpuready.core.errors import BadInput
    from gpuready.core.inventory.connection import connection_spec
    from gpuready.validate.node import fanout, marks, perf
    from gpuready.validate.node.checks import topology
    from gpuready.validate.node.checks.selection import select

    opts = ctx.options
    if opts["check"] and not opts["mark_nodes"]:
        raise BadInput("--check only applies to --mark-nodes (the checks themselves change nothing)")
    inv = ctx.inventory
    selection = select(opts["only"], opts["skip"])
    hosts = inv.limit(opts["limit"], "gpu_nodes")
    if not hosts:
        raise BadInput(f"{inv.path}: no host in group gpu_nodes")
    if opts["through"] == "kubernetes":
        return _through_kubernetes(ctx, hosts)
    hosts, api_only = _reachable(inv, hosts)
    if not hosts:
        raise BadInput(
            f"{inv.path}: the chosen GPU nodes ({_names(api_only)}) are in group {KUBE_ONLY_GROUP}, reached only "
            "through the Kubernetes API (the lab's kwok nodes are): there is no host to log in to; "
            "use `gpuready validate cluster`"
        )
    if api_only:
        ctx.note(f"validate gpu-node: {len(api_only)} host(s) of {KUBE_ONLY_GROUP} left out ({_names(api_only)})")
    if opts["mark_nodes"]:
        marks.control_plane(inv)  # refused before any host is reached
    settings = inv.settings
    if opts["dcgm_level"] is not None:
        checks_settings = settings.node_checks.model_copy(update={"dcgm_level": opts["dcgm_level"]})
        settings = settings.model_copy(update={"node_checks": checks_settings})
    targets = [fanout.Target(h, connection_spec(h, inv.host_vars(h)), inv.node_class(h)) for h in hosts]
    count = f"{len(targets)} host{'s' if len(targets) != 1 else ''}"
    # Short, to share the screen with the verdict, which names the run folder last.
    # The run folder first (command.txt in it): a disk that cannot hold the results stops the run before any host
    # is validated, in one line.
    _ = ctx.run_dir
    ctx.note(f"validate gpu-node: {count} of {inv.path}, {opts['workers']} at once")
    if selection.added:
        ctx.note(f"validate gpu-node: --only adds {', '.join(selection.added)}: the selected checks depend on them")

    failing_hosts: list[str] = []

    def progress(event: fanout.HostDone) -> None:
        if event.failing:
            failing_hosts.append(event.host)
        if not (ctx.verbose or worth_a_line(event, len(failing_hosts))):
            return
        state = f"{event.failing} failing" if event.failing else "ok"
        ctx.note(
            f"[{event.done}/{event.total}] {event.host}: {state} ({event.seconds:.1f}s) · "
            f"{len(failing_hosts)} host(s) failing so far"
        )

    result = ctx.new_result()
    started = time.monotonic()
    checks = fanout.run(
        targets,
        settings,
        workers=opts["workers"],
        host_timeout=opts["host_timeout"],
        progress=progress,
        only=selection.ids,
    )
    # The mates rule across hosts: a GPU slow against every other GPU of its model in this run fails.
    # The nodes of one rack (host variable gpuready_nvlink_domain) report one fabric cluster and clique.
    topology.across_domains(checks, {h: str(d) for h in hosts if (d := inv.host_vars(h).get(NVLINK_DOMAIN_VAR))})
    result.add(*perf.across_run(checks))
    record_figures(result, checks, inv.node_class)
    result.metrics.update(
        {
            "hosts": len(targets),
            "hosts_failing": len({c.host for c in result.checks if c.status in ("failed", "error")}),
            "wall_seconds": round(time.monotonic() - started, 3),
        }
    )
    if opts["mark_nodes"]:
        marks.mark(result, inv, ctx.run_dir, check=opts["check"], progress=ctx.progress)
    return result


def _through_kubernetes(ctx: Context, hosts: list[str]) -> RunResult:
    """The catalogue in a pod on each GPU node, through the Kubernetes API (validate/node/kube_pods.py)."""
    from gpuready.core.errors import BadInput, GpureadyError
    from gpuready.core.platforms import kube
    from gpuready.validate.node import kube_pods, marks

    opts = ctx.options
    chosen = [f"--{name.replace('_', '-')}" for name in ("only", "skip", "dcgm_level") if opts[name] is not None]
    if chosen:
        raise BadInput(f"{', '.join(chosen)}: not with --through kubernetes (the pods run the full set as it is)")
    inv = ctx.inventory
    if opts["mark_nodes"]:
        marks.control_plane(inv)
    settings = inv.settings.kubernetes
    result = ctx.new_result()
    try:
        client = kube.connect(settings)
        result.add(*kube_pods.run(ctx, client, settings, hosts, "full", opts["host_timeout"]))
    except GpureadyError as e:
        e.partial = result  # type: ignore[attr-defined]  # what finished before the API went away is still written
        raise
    result.metrics.update(
        {
            "hosts": len(hosts),
            "hosts_failing": len({c.host for c in result.checks if c.status in ("failed", "error")}),
        }
    )
    if opts["mark_nodes"]:
        marks.mark(result, inv, ctx.run_dir, check=opts["check"], progress=ctx.progress)
    return result


#: How the node checks label a figure of a GPU pair (peer-to-peer bandwidth).
_PAIR = re.compile(r"GPU (\d+) -> GPU (\d+)")


def record_figures(result: RunResult, checks: list[Check], node_class: Callable[[str], NodeClass]) -> None:
    """Every figure the performance checks measured (the median of its samples), with the lower bound it was
    judged against where there is one: per host and GPU (or GPU pair, or the node for all-reduce); and each GPU
    that asks for a recovery action (gpu_recovery_action_required, labelled with the action)."""
    from gpuready.core import figures
    from gpuready.validate.node import perf, recovery, references

    for check in checks:
        if isinstance(check, recovery.RecoveryCheck):
            # One series per GPU that asks for a recovery action, named by it: alert on it, act on its label.
            for index, (bus_id, action) in check.asking.items():
                whose = {"host": check.host, "check": check.id, "gpu": index, "bus_id": bus_id, "action": action}
                figures.record(result, "gpu_recovery_action_required", "GPUs", 1, **whose)
        if not isinstance(check, perf.PerfCheck):
            continue
        unit = references.METRICS[check.metric]
        name = check.metric.removesuffix("_tflops")
        overrides = node_class(check.host).references
        for figure in check.figures:
            labels: dict[str, object] = {"host": check.host, "check": check.id, "model": figure.model}
            if figure.gpu is not None:
                labels.update(gpu=figure.gpu.index, bus_id=figure.gpu.bus_id)
            elif pair := _PAIR.fullmatch(figure.label):
                labels.update(gpu=pair[1], peer_gpu=pair[2])
            else:
                labels["gpus"] = figure.label
            figures.record(result, name, unit, figure.median, **labels)
            ref = references.lookup(figure.model, check.metric, figure.gpu, overrides)
            if ref is not None:
                figures.record(result, f"{name}_lower_bound", unit, ref.lower, **labels)


def _reachable(inv: Inventory, hosts: list[str]) -> tuple[list[str], list[str]]:
    """The hosts gpu-node can log in to, and those of kube_only_nodes: their connection settings (the lab gives
    its kwok nodes a local connection) would run the node checks on some other machine under their names."""
    api_only = [h for h in hosts if KUBE_ONLY_GROUP in inv.host_groups.get(h, ())]
    return [h for h in hosts if h not in api_only], api_only


def _names(hosts: list[str], shown: int = 3) -> str:
    more = len(hosts) - shown
    return ", ".join(hosts[:shown]) + (f" and {more} more" if more > 0 else "")
