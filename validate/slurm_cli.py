"""``gpuready slurm``: the node checks where Slurm runs them, acting through Slurm.

- ``health-check``: for slurm.conf's HealthCheckProgram. A failed check drains the node with the reason
  ``gpuready: <check id>: <message>``; a pass resumes the node only when the drain was gpuready's.
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
from typing import TYPE_CHECKING, NoReturn

import click

from gpuready.core.prometheus_textfile import metrics_option
from gpuready.validate.this_node import node_options

if TYPE_CHECKING:
    from gpuready.core.results import Check
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
@metrics_option
def health_check(
    check_set: str,
    budget: float | None,
    settings_file: Path | None,
    node_class: str | None,
    node_name: str | None,
    verdict_path: Path | None,
    from_verdict: Path | None,
) -> None:
    """HealthCheckProgram: drain this node when a check fails; resume it when they pass, if gpuready drained it.

    A node drained by an admin or another tool is left alone. A check that could not run changes nothing.
    Exit codes: 0 passed, 1 a check failed (the node is drained), 2 bad input, 3 could not run or reach Slurm."""
    from gpuready.core.errors import BadInput, GpureadyError
    from gpuready.validate import slurm as s
    from gpuready.validate.node import local, node_verdict
    from gpuready.validate.this_node import summary_line

    try:
        name = local.node_name(node_name)
        s.scontrol_path()
        s.show_node(name)  # a node Slurm does not know is refused before any check runs
        if from_verdict is not None:
            verdict = node_verdict.read(from_verdict)
            if verdict["host"] != name:
                raise BadInput(f"{from_verdict}: the verdict of node {verdict['host']!r}, not of this node ({name})")
            code = {"passed": 0, "failed": 1}.get(str(verdict["status"]), 3)
            click.echo(summary_line(verdict), err=True)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    if from_verdict is None:
        verdict, code = _run(check_set, budget, settings_file, node_class, name, verdict_path)
    failure = _failure(verdict)
    try:
        node = s.show_node(name)  # again: the checks took time, and an admin may have drained it meanwhile
        action = s.decide(str(verdict["status"]), failure, node)
        s.apply(node, action)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    _say(name, action)
    sys.exit(code)


def _gate(which: str) -> click.Command:
    @node_options
    @verdict_option
    @metrics_option
    def gate(
        check_set: str,
        budget: float | None,
        settings_file: Path | None,
        node_class: str | None,
        node_name: str | None,
        verdict_path: Path | None,
    ) -> None:
        from gpuready.core.errors import GpureadyError
        from gpuready.validate import slurm as s
        from gpuready.validate.node import local

        try:
            name = local.node_name(node_name)
        except GpureadyError as e:
            fail(str(e), e.exit_code)
        verdict, _ = _run(check_set, budget, settings_file, node_class, name, verdict_path)
        failure = _failure(verdict)
        if failure is None:
            sys.exit(0)  # passed, or could not judge: the job goes on
        try:
            node = s.show_node(name)
            action = s.decide("failed", failure, node)
            s.apply(node, action)
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


def _run(
    check_set: str,
    budget: float | None,
    settings_file: Path | None,
    node_class: str | None,
    name: str,
    verdict_path: Path | None,
) -> tuple[dict[str, object], int]:
    from gpuready.validate.this_node import finish, run_here

    done = run_here(check_set, budget, settings_file, node_class, name)
    verdict = finish(done, check_set, budget, verdict_path, None)
    return verdict, done.result.exit_code()


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


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"gpuready: error: {message}", err=True)
    sys.exit(code)
