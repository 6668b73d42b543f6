"""``--metrics PATH``: a run's check results and measured figures as a node_exporter textfile.

node_exporter's textfile collector reads every ``*.prom`` file of the folder given to
``--collector.textfile.directory``, in the Prometheus text format, without timestamps, and a file must be
written whole: to a temporary name in the same folder, then renamed (node_exporter README, "Textfile
Collector"; https://github.com/prometheus/node_exporter#textfile-collector). Each run replaces its file.
Names follow https://prometheus.io/docs/practices/naming/ (an application prefix, base units as a
suffix); label values and HELP are escaped as https://prometheus.io/docs/instrumenting/exposition_formats/
says. Every series carries a ``command`` label, and each name has one HELP text whatever the command, so
the files of several commands sit in one folder without clashing.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from gpuready.core import figures, redact
from gpuready.core.results import CHECK_STATUSES, ERROR, FAILED, PASSED, RunResult

SUFFIX = ".prom"
#: Where --metrics is kept between the option's parsing and the end of the run.
META_KEY = "gpuready.metrics_path"
#: The file's mode: node_exporter usually runs as its own user, and reads the file, never writes it.
FILE_MODE = 0o644
RUN_STATUSES = (PASSED, FAILED, ERROR)
#: How HELP texts name a unit suffix.
UNIT_WORDS = {
    "bytes_per_second": "bytes per second",
    "flops": "floating-point operations per second",
    "images_per_second": "images per second",
    "ratio": "a ratio (1 is 100%)",
}


def metrics_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--metrics PATH``, checked when it is parsed and handed to :func:`gpuready.core.command.execute`
    through click's context, so a command's own signature stays as it is."""
    return click.option(
        "--metrics",
        type=click.Path(),
        default=None,
        expose_value=False,
        callback=_remember,
        metavar="PATH",
        help="Also write the check results and measured figures as a Prometheus textfile (a .prom file, or a "
        "folder: node_exporter's --collector.textfile.directory), replaced whole on each run.",
    )(func)


def _remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    ctx.meta[META_KEY] = target(value, ctx.command_path)


def target(value: str, command_path: str) -> Path:
    """The file --metrics names: a ``.prom`` file in an existing folder, or a folder (then
    ``gpuready_<command>.prom`` in it). Anything else is refused before the run starts."""
    if not value.strip():
        raise click.BadParameter("empty; name a .prom file or a folder")
    path = Path(value)
    if path.is_dir():
        command = "_".join(command_path.split()[1:]) or "run"
        path = path / f"gpuready_{command.replace('-', '_')}{SUFFIX}"
    elif path.suffix != SUFFIX:
        raise click.BadParameter(f"{value}: node_exporter's textfile collector reads only *{SUFFIX} files")
    if not path.parent.is_dir():
        raise click.BadParameter(f"{value}: no folder {path.parent}")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{value}: the folder {path.parent} is not writable")
    return path


def requested() -> Path | None:
    """The file --metrics named in this command line, if any."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(META_KEY) if ctx is not None else None


def write(run: RunResult, path: Path) -> None:
    """Write ``run`` to ``path`` atomically (a temporary file in the same folder, renamed over it). The temporary
    name does not end in .prom, so the collector never reads a half-written file."""
    from gpuready.core.artifacts import write_text

    write_text(path, redact.text(render(run)), mode=FILE_MODE & ~_umask(), what="the metrics file")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Family:
    """One metric name: its HELP, and its series in the order they were added (a repeated label set is dropped:
    node_exporter refuses a file that has one twice)."""

    def __init__(self, name: str, help: str) -> None:
        self.name, self.help = name, help
        self.series: dict[tuple[tuple[str, str], ...], float] = {}

    def add(self, value: float, **labels: str) -> None:
        self.series.setdefault(tuple(labels.items()), value)

    def lines(self) -> Iterable[str]:
        yield f"# HELP {self.name} {escape_help(self.help)}"
        yield f"# TYPE {self.name} gauge"
        for labels, value in self.series.items():
            inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            yield f"{self.name}{{{inner}}} {number(value)}"


def escape_label(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and line feed escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(value: str) -> str:
    """HELP text: backslash and line feed escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def number(value: float) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _epoch(iso: str) -> float | None:
    try:
        return _dt.datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return None


def render(run: RunResult) -> str:
    """The textfile: the run (status, times, counts), each check result per host, each measured figure."""
    from gpuready.core import __version__

    command = run.command
    families: dict[str, Family] = {}

    def family(name: str, help: str) -> Family:
        return families.setdefault(name, Family(name, help))

    family("gpuready_run_info", "The gpuready version and the inventory of the run, as labels; always 1.").add(
        1, command=command, version=__version__, inventory=run.inventory
    )
    run_status = family(
        "gpuready_run_status", "1 for the run's overall status (passed, failed or error), 0 for the others."
    )
    for status in RUN_STATUSES:
        run_status.add(int(run.status == status), command=command, status=status)
    started, finished = _epoch(run.started), _epoch(run.finished)
    if started is not None:
        family("gpuready_run_start_timestamp_seconds", "When the run started, in seconds since the epoch.").add(
            started, command=command
        )
    if finished is not None:
        family("gpuready_run_end_timestamp_seconds", "When the run ended, in seconds since the epoch.").add(
            finished, command=command
        )
    if started is not None and finished is not None:
        family("gpuready_run_duration_seconds", "How long the run took.").add(finished - started, command=command)
    counts = run.counts()
    checks = family("gpuready_run_checks", "Check results of the run by status (every host together).")
    for status in CHECK_STATUSES:
        checks.add(counts[status], command=command, status=status)
    per_host: dict[str, dict[str, int]] = {}
    results = family(
        "gpuready_check_results",
        "Results of one check on one host, by status: usually 1; a check that judges several items of a host "
        "(each GPU of a VM) counts each. A series exists only for the statuses the check had.",
    )
    tally: dict[tuple[str, str, str], int] = {}
    for check in run.checks:
        key = (check.id, check.host, check.status)
        tally[key] = tally.get(key, 0) + 1
        per_host.setdefault(check.host, dict.fromkeys(CHECK_STATUSES, 0))[check.status] += 1
    for (check_id, host, status), n in tally.items():
        results.add(n, command=command, check=check_id, host=host, status=status)
    # What a failed check says and what to do, as a Slurm drain reason and a node verdict say it: one state.
    for check in run.checks:
        if check.status == FAILED:
            family(
                "gpuready_check_failure_info",
                "A failed check's message and remedy on one host, as labels; always 1. Only failed checks have one.",
            ).add(1, command=command, check=check.id, host=check.host, message=check.message, remedy=check.remedy)
    hosts = family("gpuready_host_checks", "Check results of one host by status (0 included).")
    for host, host_counts in per_host.items():
        for status, n in host_counts.items():
            hosts.add(n, command=command, host=host, status=status)
    family("gpuready_run_hosts", "Hosts (or VMs, or the cluster) the run has check results for.").add(
        len(per_host), command=command
    )
    for item in figures.recorded(run):
        _add_figure(family, command, item)
    lines = [line for f in families.values() for line in f.lines()]
    return "\n".join(lines) + "\n"


def _add_figure(family: Callable[[str, str], Family], command: str, item: dict[str, Any]) -> None:
    unit = str(item.get("unit", ""))
    if unit not in figures.UNITS or not isinstance(item.get("value"), int | float):
        return
    suffix, factor = figures.UNITS[unit]
    base = str(item["name"])
    name = f"gpuready_{base}" if base.endswith(suffix) else f"gpuready_{base}_{suffix}"
    what = base.replace("_", " ")
    help = f"Measured by gpuready: {what}, in {UNIT_WORDS.get(suffix, suffix)} (the reports show {unit})."
    value = item["value"] * factor if factor != 1 else item["value"]
    labels = {k: str(v) for k, v in (item.get("labels") or {}).items() if k != "command"}
    family(name, help).add(value, command=command, **labels)
