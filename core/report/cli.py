"""``gpuready report``: a finished run's verdict again (``show``, here with the reports), and the training reports
(``compare``, ``collect``), which the workloads build and this group names lazily."""

from __future__ import annotations

import click

from gpuready.core.lazy import LazyGroup
from gpuready.core.report.show import show

TRAINING = {
    "compare": ("gpuready.workloads.cli:compare", "Put validate training runs side by side: images/s and overhead."),
    "collect": ("gpuready.workloads.cli:collect", "Read the output of training jobs submitted by hand into a report."),
}


@click.group("report", cls=LazyGroup, lazy=TRAINING)
def report() -> None:
    """Reports built from earlier runs' artifact folders."""


report.add_command(show)
