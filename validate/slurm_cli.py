"""``gpuready slurm``: the node checks where Slurm runs them, acting through Slurm.

- ``health-check``: for slurm.conf's HealthCheckProgram. A failed check drains the node with the reason
  ``gpuready: <check id>: <message>``; a pass resumes the node only when the drain was gpuready's.
- ``sweep``: every node of a partition from one sbatch job, the node verdicts as one run folder.
- ``prolog`` / ``epilog``: a gate. A failed check drains the node with gpuready's reason and exits 1, which
  Slurm answers by draining the node and requeueing the job held (slurm.conf(5), "Prolog and Epilog Scripts":
  "If the Prolog fails (returns a non-zero exit code), this will result in the node being set to a DRAIN
  state and the job being requeued in a held state"); a check that could not run exits 0: a job is never
  refused, nor a node drained, for what gpuready could not judge.

Every command writes the same node verdict as ``validate this-node`` (``--verdict``), so the reason, the verdict,
the metrics and the report say the same check id, message and remedy.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuready.core.command import FiniteFloatRange, artifacts_option
from gpuready.core.report.metrics import metrics_option
from gpuready.validate.this_node import NodeOptions, fail, node_options

if TYPE_CHECKING:
    from gpuready.core.command import Context
    from gpuready.core.results import Check, RunResult
    from gpuready.validate.slurm import Action


@click.group("slurm")
def slurm() -> None:
    """Run the node checks as Slurm's health check, prolog or epilog; drain and resume through scontrol."""


def verdict_option(func: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--verdict",
        "verdict_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        metavar="PATH",
        help="Also write the node verdict (JSON) here: Slurm keeps no output of these programs.",
    )(func)


@slurm.command("health-check")
@node_options
@verdict_option
@click.option(
    "--from-verdict",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="PATH",
    help="Act on this node verdict instead of running the checks (the full set, run by a timer, takes longer than "
    "the 60 seconds slurmd gives a HealthCheckProgram).",
)
@click.option(
    "--max-age",
    type=FiniteFloatRange(1, 30 * 86400),
    default=3600,
    show_default=True,
    metavar="SECONDS",
    help="With --from-verdict: an older verdict is no verdict (nothing is drained or resumed; exit 3).",
)
@metrics_option
def health_check(node: NodeOptions, verdict_path: Path | None, from_verdict: Path | None, max_age: float) -> None:
    """HealthCheckProgram: drain this node when a check fails; resume it when they pass, if gpuready drained it.

    A node drained by an admin or another tool is left alone. A check that could not run changes nothing.
    Exit codes: 0 passed, 1 a check failed (the node is drained), 2 bad input, 3 could not run or reach Slurm."""
    from gpuready.core.errors import BadInput, GpureadyError, Unreachable
    from gpuready.validate import slurm as s
    from gpuready.validate.node import local, node_verdict
    from gpuready.validate.this_node import summary_line

    try:
        name = local.node_name(node.node_name)
        s.scontrol_path()
        s.show_node(name)  # a node Slurm does not know is refused before any check runs
        if from_verdict is not None:
            verdict = node_verdict.read(from_verdict)
            if verdict["host"] != name:
                raise BadInput(f"{from_verdict}: the verdict of node {verdict['host']!r}, not of this node ({name})")
            age = _age(str(verdict["time"]), str(from_verdict))
            if age > max_age:  # stale: what it said may no longer be so, and unknown is neither failed nor passed
                raise Unreachable(f"{from_verdict}: written {age:.0f}s ago, older than --max-age {max_age:.0f}s")
            code = {"passed": 0, "failed": 1}.get(str(verdict["status"]), 3)
            click.echo(summary_line(verdict), err=True)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    if from_verdict is None:
        verdict, code = _run(node, name, verdict_path)
    failure = _failure(verdict)
    try:
        in_slurm = s.show_node(name)  # again: the checks took time, and an admin may have drained it meanwhile
        action = s.decide(str(verdict["status"]), failure, in_slurm)
        s.apply(in_slurm, action)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    _say(name, action)
    sys.exit(code)


def _gate(which: str) -> click.Command:
    @node_options
    @verdict_option
    @metrics_option
    def gate(node: NodeOptions, verdict_path: Path | None) -> None:
        from gpuready.core.errors import GpureadyError
        from gpuready.validate import slurm as s
        from gpuready.validate.node import local

        try:
            name = local.node_name(node.node_name)
        except GpureadyError as e:
            fail(str(e), e.exit_code)
        verdict, _ = _run(node, name, verdict_path)
        failure = _failure(verdict)
        if failure is None:
            sys.exit(0)  # passed, or could not judge: the job goes on
        try:
            in_slurm = s.show_node(name)
            action = s.decide("failed", failure, in_slurm)
            s.apply(in_slurm, action)
            _say(name, action)
        except GpureadyError as e:  # Slurm still drains the node for the exit code below, with its own reason
            click.echo(f"gpuready: error: {e}", err=True)
        sys.exit(1)

    gate.__doc__ = (
        f"{which.capitalize()}: exit 1 when a check fails (Slurm then drains the node"
        + (" and requeues the job held" if which == "prolog" else "")
        + "), after draining it with gpuready's reason; exit 0 when the checks pass or could not run."
    )
    return slurm.command(which)(gate)


prolog = _gate("prolog")
epilog = _gate("epilog")


def _run(node: NodeOptions, name: str, verdict_path: Path | None) -> tuple[dict[str, object], int]:
    import dataclasses

    from gpuready.validate.this_node import finish, run_here

    named = dataclasses.replace(node, node_name=name)
    done = run_here(named)
    verdict = finish(done, named, verdict_path, None)
    return verdict, done.result.exit_code()


def _age(time_text: str, where: str) -> float:
    """Seconds since a verdict's time."""
    import datetime as dt

    from gpuready.core.errors import BadInput

    try:
        written = dt.datetime.fromisoformat(time_text)
    except ValueError:
        raise BadInput(f"{where}: time {time_text!r} is not an ISO 8601 time") from None
    if written.tzinfo is None:
        raise BadInput(f"{where}: time {time_text!r} has no time zone")
    return (dt.datetime.now(dt.timezone.utc) - written).total_seconds()


def _failure(verdict: dict[str, object]) -> Check | None:
    from gpuready.core.results import Check

    failure = verdict.get("failure")
    if not isinstance(failure, dict):
        return None
    return Check(
        str(failure["id"]), str(verdict["host"]), "failed", str(failure["message"]), "", str(failure["remedy"])
    )


def _say(name: str, action: Action) -> None:
    if action.kind == "drain":
        click.echo(f"gpuready: {name}: drained: {action.reason}", err=True)
    elif action.kind == "resume":
        click.echo(f"gpuready: {name}: resumed: {action.why}", err=True)
    else:
        click.echo(f"gpuready: {name}: unchanged: {action.why}", err=True)


@slurm.command("sweep")
@click.option("--partition", "-p", required=True, help="The partition whose nodes are checked, one task per node.")
@node_options
@artifacts_option
@click.option(
    "--timeout",
    type=FiniteFloatRange(10, 86400),
    default=900,
    show_default=True,
    help="Seconds to wait for the sweep job (queueing included); then it is cancelled and the nodes without a "
    "verdict are errors.",
)
@click.option(
    "--gpuready-command",
    default=None,
    metavar="COMMAND",
    help="How the nodes run gpuready (default: this Python, at the same path on every node).",
)
@click.option("-v", "--verbose", count=True, help="More detail.")
@metrics_option
def sweep(
    partition: str,
    node: NodeOptions,
    artifacts: Path | None,
    timeout: float,
    gpuready_command: str | None,
    verbose: int,
) -> None:
    """Check every node of a partition from one sbatch job (one task per node running validate this-node); the
    node verdicts become one run folder. The run folder must be on a file system the nodes share."""
    from gpuready.core.command import Context, execute

    options = {
        "partition": partition,
        "set": node.check_set,
        "budget": node.budget,
        "settings": node.settings_file,
        "node_class": node.node_class,
        "node_name": node.node_name,
        "timeout": timeout,
        "gpuready": gpuready_command,
    }
    execute(Context("slurm sweep", Path(node.settings_file or ""), artifacts, verbose, options), _sweep)


def _sweep(ctx: Context) -> RunResult:
    import math
    import time

    from gpuready.core.errors import BadInput
    from gpuready.validate import slurm_sweep as sw
    from gpuready.validate.node import local

    opts = ctx.options
    if opts["node_name"]:
        raise BadInput("--node-name names one node; a sweep names each node after itself")
    local.node_settings(opts["settings"], opts["node_class"])  # refused here, not on every node
    nodes = sw.partition_nodes(opts["partition"])
    usable = [n.name for n in nodes if n.usable]
    result = ctx.new_result()
    started = time.monotonic()
    if usable:
        folder = ctx.run_dir / "verdicts"
        folder.mkdir(mode=0o755)
        node_args = ["--set", opts["set"]]
        if opts["budget"]:
            node_args += ["--budget", str(opts["budget"])]
        if opts["settings"]:
            node_args += ["--settings", str(Path(opts["settings"]).resolve())]
        if opts["node_class"]:
            node_args += ["--node-class", opts["node_class"]]
        command = sw.step_command(opts["gpuready"] or sw.default_gpuready(), folder, node_args)
        job = sw.submit(opts["partition"], usable, command, folder, max(1, math.ceil(opts["timeout"] / 60)))
        ctx.note(f"slurm sweep: job {job} on {len(usable)} node(s) of {opts['partition']} — artifacts in {ctx.run_dir}")
        state = sw.wait(job, opts["timeout"], on_state=lambda s: ctx.note(f"slurm sweep: job {job} {s}"))
        result.metrics["slurm_job"] = {"id": job, "state": state}
    else:
        state = "not submitted"
    if len(usable) < len(nodes):
        ctx.note(f"slurm sweep: {len(nodes) - len(usable)} node(s) not schedulable, left out")
    result.add(*sw.collect(ctx.run_dir / "verdicts", nodes, usable, state))
    result.metrics.update(
        {
            "hosts": len(nodes),
            "hosts_failing": len({c.host for c in result.checks if c.status in ("failed", "error")}),
            "wall_seconds": round(time.monotonic() - started, 3),
        }
    )
    return result
