"""``gpuready validate this-node``: the GPU node catalogue on the node it runs on, without an inventory or SSH.

For what runs on the node itself (Slurm's HealthCheckProgram, a prolog or epilog, an sbatch sweep's step, a
Kubernetes pod): one node verdict as JSON (docs/fleet.md), the usual exit codes, and a run folder only when
``--artifacts`` asks for one (a health check every few minutes would otherwise fill the disk).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from gpuready.core.command import FiniteFloatRange
from gpuready.core.report.metrics import metrics_option

if TYPE_CHECKING:
    from gpuready.validate.node.local import LocalRun


@dataclass(frozen=True)
class NodeOptions:
    """What every node-local command takes: the set, the budget, the settings and node class, the node's name."""

    check_set: str
    budget: float | None
    settings_file: Path | None
    node_class: str | None
    node_name: str | None

    @property
    def budget_seconds(self) -> float:
        from gpuready.validate.node import local

        return self.budget or local.DEFAULT_BUDGET[self.check_set]


def node_options(func: Callable[..., None]) -> Callable[..., None]:
    """The options of NodeOptions, given to the command as one argument ``node``."""

    @functools.wraps(func)
    def with_node(
        check_set: str,
        budget: float | None,
        settings_file: Path | None,
        node_class: str | None,
        node_name: str | None,
        **rest: Any,
    ) -> None:
        func(node=NodeOptions(check_set, budget, settings_file, node_class, node_name), **rest)

    command: Callable[..., None] = with_node
    for option in reversed(
        [
            click.option(
                "--set",
                "check_set",
                type=click.Choice(["quick", "full"]),
                default="quick",
                show_default=True,
                help="quick: the checks that only read (seconds; for a prolog or health check); full: the whole "
                "catalogue, the measurements and DCGM's diagnostic included.",
            ),
            click.option(
                "--budget",
                type=FiniteFloatRange(1, 3600),
                default=None,
                metavar="SECONDS",
                help="Seconds the node's read-only commands may take (default: 20 quick, 120 full); past it the "
                "run is an error, never a failure. The full set's measurements run after, each under its own limit.",
            ),
            click.option(
                "--settings",
                "settings_file",
                type=click.Path(path_type=Path, dir_okay=False),
                default=None,
                help="A gpuready settings file (an inventory's group_vars/all/gpuready.yml). Default: none; the "
                "checks against a declared node class (gpu.count, gpu.model, driver.version) are then not judged.",
            ),
            click.option(
                "--node-class", default=None, metavar="NAME", help="The node class of --settings (default: its first)."
            ),
            click.option(
                "--node-name",
                default=None,
                metavar="NAME",
                help="This node's name in the verdict (default: $SLURMD_NODENAME, else the short host name).",
            ),
        ]
    ):
        command = option(command)
    return command


@click.command("this-node")
@node_options
@click.option(
    "--verdict",
    "verdict_path",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    default=None,
    metavar="PATH",
    help="Write the node verdict (JSON, schema gpuready.node-verdict/v1) here; '-': on stdout.",
)
@click.option(
    "--artifacts",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write a run folder here (summary.json, junit.xml, report.md, report.html), as validate gpu-node does.",
)
@metrics_option
def this_node(node: NodeOptions, verdict_path: Path | None, artifacts: Path | None) -> None:
    """Check this node with the GPU node catalogue, locally: no inventory, no SSH; writes a node verdict.

    Exit codes: 0 passed, 1 a check failed, 2 bad input, 3 a check could not run (or the budget ran out)."""
    from gpuready.core import cancel

    with cancel.handling_signals():
        try:
            done = run_here(node)
            finish(done, node, verdict_path, artifacts)
        except KeyboardInterrupt:
            fail(cancel.reason(), cancel.exit_code())
    sys.exit(done.result.exit_code())


def run_here(options: NodeOptions) -> LocalRun:
    """The set's checks on this node; bad input and errors leave as one line and their exit code."""
    from gpuready.core.errors import GpureadyError
    from gpuready.validate.node import local
    from gpuready.validate.node.checks.selection import check_set as ids_of

    try:
        node = local.node_settings(options.settings_file, options.node_class)
        return local.run(local.node_name(options.node_name), node, ids_of(options.check_set), options.budget_seconds)
    except GpureadyError as e:
        fail(str(e), e.exit_code)


def finish(
    done: LocalRun, options: NodeOptions, verdict_path: Path | None, artifacts: Path | None
) -> dict[str, object]:
    """Write what was asked (the verdict, a run folder, the metrics) and print the one-line summary to stderr.
    Returns the verdict."""
    from gpuready.core.artifacts import ArtifactNotWritten, write_json
    from gpuready.core.errors import GpureadyError
    from gpuready.core.report import metrics as metrics_file
    from gpuready.core.results import now_iso
    from gpuready.validate.node import node_verdict

    result = done.result
    result.finished = now_iso()
    host = result.checks[0].host if result.checks else ""
    verdict = node_verdict.build(
        result, host, options.check_set, budget_seconds=options.budget_seconds, seconds=done.seconds
    )
    try:
        if artifacts is not None:
            from gpuready.core.artifacts import make_private, new_run_dir
            from gpuready.core.report import writers

            folder = new_run_dir(artifacts, result.command)
            try:
                writers.write_all(result, folder)
                write_json(folder / "node-verdict.json", verdict)
            finally:
                make_private(folder)
        if metrics := metrics_file.requested():
            metrics_file.write(result, metrics)
        if verdict_path is not None and str(verdict_path) == "-":
            import json

            click.echo(json.dumps(verdict, indent=2))
        elif verdict_path is not None:
            write_json(verdict_path, verdict)
    except ArtifactNotWritten as e:
        fail(str(e), e.exit_code)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    click.echo(summary_line(verdict), err=True)
    return verdict


def summary_line(verdict: dict[str, object]) -> str:
    """One line: the node, its status, the counts, and the first failure with its remedy."""
    counts = verdict.get("counts") or {}
    assert isinstance(counts, dict)
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    line = f"gpuready: {verdict['host']}: {verdict['status']} ({tally}; {verdict['set']} set, {verdict['seconds']}s)"
    failure = verdict.get("failure")
    checks = verdict.get("checks") or []
    assert isinstance(checks, list)
    unknown = next((c for c in checks if c["status"] == "error"), None)
    if isinstance(failure, dict):
        line += f": {failure['id']}: {failure['message']}"
    elif unknown is not None:  # could not run: said as such, it is no finding about the node
        line += f": could not run {unknown['id']}: {unknown['message']}"
    return line


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"gpuready: error: {message}", err=True)
    sys.exit(code)
