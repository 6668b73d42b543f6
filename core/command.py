"""What every gpuready command shares: options, the artifact folder, errors to exit codes, output.

A command body receives a :class:`Context` and returns a :class:`RunResult`; :func:`execute`
does the rest, so every command reports and exits the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from gpuready.core.errors import BadInput, Cancelled, GpureadyError
from gpuready.core.results import RunResult

if TYPE_CHECKING:
    from rich.console import Console

    from gpuready.core.artifacts import ArtifactNotWritten
    from gpuready.core.inventory import Inventory
    from gpuready.core.runner import TaskEvent

DEFAULT_INVENTORY = "inventories/local"


def default_inventory() -> str:
    """$GPUREADY_INVENTORY, else ./inventories/local (a checkout), else the copy of it gpuready ships."""
    if os.environ.get("GPUREADY_INVENTORY"):
        return os.environ["GPUREADY_INVENTORY"]
    if Path(DEFAULT_INVENTORY).exists():
        return DEFAULT_INVENTORY
    from importlib.resources import files

    return str(files("gpuready.inventories") / "local")


def inventory_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "-i",
        "--inventory",
        "inventory_path",
        type=click.Path(path_type=Path),
        show_default=DEFAULT_INVENTORY,
        default=default_inventory,
        help="Ansible inventory folder (hosts.yml + group_vars/) or hosts file.",
    )(func)


def folder_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A folder option as a Path; '' (a variable that expanded to nothing) is refused, since click and pathlib
    would read it as the current folder and scatter the run's files there."""
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter("empty; name a folder (or leave the option out for the default)")
    return Path(value)


def comma_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """A comma-separated list option; one that names nothing ('' or ',') is refused: left out, these options
    mean "everything", so an empty value (a variable that expanded to nothing) would widen the run."""
    if value is None:
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise click.BadParameter(f"{value!r} names nothing; list at least one (or leave the option out for all)")
    return items


def folder_option(flag: str, help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An option naming a folder, checked by :func:`folder_path`; left out, None: the command picks its default."""
    return click.option(flag, type=click.Path(), default=None, callback=folder_path, help=help)


artifacts_option = folder_option(
    "--artifacts", "Folder for run artifacts [default: ./gpuready-runs, or $GPUREADY_ARTIFACTS]."
)


def limit_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--limit", "-l", default=None, metavar="PATTERN", help="Only hosts matching this Ansible host pattern."
    )(func)


class FiniteFloatRange(click.FloatRange):
    """A float range that also refuses nan and infinity (nan passes every comparison of FloatRange)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: Where the --output choice is kept (click's context meta), so commands need no parameter for it.
OUTPUT_KEY = "gpuready.output"


def _keep_output(ctx: click.Context, param: click.Parameter, value: str) -> str:
    ctx.meta[OUTPUT_KEY] = value
    return value


def output_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        expose_value=False,
        callback=_keep_output,
        help="json: the run's summary.json on stdout and nothing else there (the verdict goes to stderr).",
    )(func)


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    return inventory_option(
        artifacts_option(
            output_option(
                click.option("-v", "--verbose", count=True, help="More detail (repeat for debug logs).")(func)
            )
        )
    )


@dataclass
class Context:
    """What a command body gets: its name, the inventory path, the artifact folder, the console."""

    command: str
    inventory_path: Path
    artifacts_root: Path | None = None
    verbose: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict, repr=False)
    _hosts: set[str] = field(default_factory=set, repr=False)
    _live: Any = field(default=None, repr=False)
    #: The result the body is building (from :meth:`new_result`): what a cancel still writers.
    _result: RunResult | None = field(default=None, repr=False)
    #: Lines this run has printed on stderr so far (notes, progress): the verdict takes what is left of its lines.
    err_lines: int = field(default=0, repr=False)

    @cached_property
    def inventory(self) -> Inventory:
        from gpuready.core import inventory

        return inventory.load(self.inventory_path)

    @cached_property
    def run_dir(self) -> Path:
        from gpuready.core.artifacts import new_run_dir

        return new_run_dir(self.artifacts_root, self.command)

    @cached_property
    def output(self) -> str:
        """``text`` or ``json`` (--output), from the click command that built this context."""
        current = click.get_current_context(silent=True)
        return str(current.meta.get(OUTPUT_KEY, "text")) if current else "text"

    @cached_property
    def console(self) -> Console:
        """Where the verdict and the commands' tables go: stdout, or stderr when stdout carries JSON."""
        return console(soft_wrap=False, stderr=self.output == "json")

    @cached_property
    def err(self) -> Console:
        return console(stderr=True)

    def new_result(self) -> RunResult:
        self._result = RunResult(command=self.command, inventory=str(self.inventory_path))
        return self._result

    def progress(self, event: TaskEvent) -> None:
        """One line per change or failure (every result with -v), and on a terminal a live status line
        with the counts, so a run over many hosts shows it is moving without flooding the screen."""
        from rich.markup import escape

        from gpuready.core.report.summary import showable

        self._counts[event.status] = self._counts.get(event.status, 0) + 1
        self._hosts.add(event.host)
        style = {
            "ok": "green",
            "changed": "yellow",
            "failed": "bold red",
            "unreachable": "bold magenta",
            "skipped": "dim",
        }.get(event.status, "")
        if event.status not in ("ok", "skipped") or self.verbose:
            detail = f" — {event.message}" if event.message else ""
            # One line per event, cut at the terminal's width: a wrapped task name would read as a column of words.
            self.err_lines += 1
            self.err.print(
                f"[{style}]{event.status:<11}[/] {escape(showable(event.host)):<20} "
                f"{escape(showable(event.task))}{escape(showable(detail))}",
                markup=True,
                no_wrap=True,
                overflow="ellipsis",
                crop=True,
            )
        if self.err.is_terminal:
            counts = " ".join(f"{k} {v}" for k, v in sorted(self._counts.items()))
            line = f"{len(self._hosts)} hosts · {counts} · {showable(event.task)}"
            if self._live is None:
                self._live = self.err.status(line)
                self._live.start()
            else:
                self._live.update(line)

    def stop_progress(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def note(self, message: str) -> None:
        from rich.cells import cell_len

        from gpuready.core.report.summary import showable

        # Whole, never broken at the width: a note often ends in a path to copy (the terminal wraps it). A host's
        # name or what it printed is written out, never obeyed by the terminal.
        shown = showable(message)
        self.err_lines += max(1, -(-cell_len(shown) // max(self.err.width, 1)))
        self.err.print(shown, markup=False, soft_wrap=True)


def console(*, stderr: bool = False, **options: Any) -> Console:
    """A rich console for gpuready's output. emoji=False: a PCI address such as 00000000:AB:00.0 holds ":ab:",
    which rich would print as an emoji. A $COLUMNS that is not a positive number (``COLUMNS=0``: POSIX leaves it
    unspecified) is ignored: rich would take it as zero cells and print nothing at all."""
    from rich.console import Console

    columns = os.environ.get("COLUMNS", "").strip()
    width = None
    if columns.isdigit() and int(columns) == 0:
        import shutil

        # What a terminal says it is, else 80; get_terminal_size reads $COLUMNS first only when it is positive.
        width = shutil.get_terminal_size().columns or 80
    return Console(stderr=stderr, highlight=False, emoji=False, width=width, **options)


def fail(message: str, code: int) -> NoReturn:
    from gpuready.core.report.summary import showable

    click.echo(f"gpuready: error: {showable(message)}", err=True)  # it may quote an inventory or a node
    sys.exit(code)


def execute(ctx: Context, body: Callable[[Context], RunResult]) -> NoReturn:
    """Run a command body; report its result; exit with the result's code.

    Our errors become one line and their exit code. A run that got somewhere before
    failing is still written, so nothing half-done goes unreported.
    """

    from gpuready.core import cancel

    logging.basicConfig(
        level=logging.DEBUG if ctx.verbose > 1 else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    with cancel.handling_signals():
        try:
            from gpuready.core.artifacts import artifacts_root

            artifacts_root(ctx.artifacts_root)  # a folder that cannot hold the results is refused first
            result = body(ctx)
        except (Cancelled, KeyboardInterrupt) as e:
            _cancelled(ctx, getattr(e, "partial", None) or ctx._result)
        except BadInput as e:
            ctx.stop_progress()
            fail(str(e), e.exit_code)
        except GpureadyError as e:
            ctx.stop_progress()
            partial = getattr(e, "partial", None)
            if isinstance(partial, RunResult):
                partial.aborted = str(e)
                if problem := _finish(ctx, partial, error_follows=True):
                    click.echo(f"gpuready: error: {problem}", err=True)
            fail(str(e), e.exit_code)
    problem = _finish(ctx, result, error_follows=bool(result.aborted))
    if problem:
        fail(str(problem), problem.exit_code)
    if result.aborted:
        fail(result.aborted, result.exit_code())
    sys.exit(result.exit_code())


def _cancelled(ctx: Context, partial: object) -> NoReturn:
    """Ctrl-C, SIGTERM or SIGHUP: stop every process of the run, write what finished, exit 130 (SIGINT), 143
    (SIGTERM) or 129 (SIGHUP).

    The exit is immediate (``os._exit``): a worker thread stuck in a host that never answers must not
    hold the command open after its results are written.
    """
    import signal

    from gpuready.core import cancel

    for s in cancel.SIGNALS:
        signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not cut the report short
    # After a hang-up the terminal is gone and writing to it fails (EIO): that must not keep the results from
    # being written, nor the exit code from saying what happened.
    with contextlib.suppress(OSError):
        ctx.stop_progress()
    cancel.stop_children()
    result = partial if isinstance(partial, RunResult) else ctx.new_result()
    if isinstance(partial, list):
        result.add(*partial)
    result.aborted = f"{cancel.reason()}; the checks below are what ran before"
    problem: object = None
    try:
        problem = _finish(ctx, result)
    except (OSError, GpureadyError) as e:
        problem = f"could not write or show the results: {e}"
    with contextlib.suppress(OSError):
        if problem:
            click.echo(f"gpuready: error: {problem}", err=True)
        click.echo(f"gpuready: error: {cancel.reason()}", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(cancel.exit_code())


def _finish(ctx: Context, result: RunResult, *, error_follows: bool = False) -> ArtifactNotWritten | None:
    """Write the results and show them. An artifact that cannot be written (a full disk) does not keep the
    verdict from the terminal: it is returned, to be named in one line and exit 3. ``error_follows``: the caller
    prints why the run aborted as its last line, so the verdict does not say it too."""
    from gpuready.core.artifacts import ArtifactNotWritten, make_private
    from gpuready.core.report import metrics as metrics_file
    from gpuready.core.report import terminal, writers

    ctx.stop_progress()
    problem = None
    try:
        folder = ctx.run_dir
        try:
            writers.write_all(result, folder, every_row=bool(ctx.verbose))
        finally:
            make_private(folder)
    except ArtifactNotWritten as e:
        problem = e
    if metrics := metrics_file.requested():
        try:
            metrics_file.write(result, metrics)
        except ArtifactNotWritten as e:
            problem = problem or e
    # The verdict and the lines the run printed on stderr share one screen: the verdict takes what is left.
    lines = max(terminal.MAX_LINES - ctx.err_lines, terminal.MIN_LINES)
    terminal.show(result, ctx.console, verbose=bool(ctx.verbose), error_follows=error_follows, max_lines=lines)
    if ctx.output == "json":
        click.echo(writers.as_json(result))
    return problem


__all__ = ["BadInput", "Context", "comma_list", "common_options", "execute", "fail", "limit_option"]
