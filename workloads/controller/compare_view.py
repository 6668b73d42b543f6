"""``report compare`` on the terminal: the comparison as a table, not the Markdown written to comparison.md."""

from __future__ import annotations

from typing import Any

from gpuready.workloads.controller.compare import Run, cells, setup_differences


def show(console: Any, rows: list[dict[str, Any]], runs: list[Run]) -> None:
    """images/s per worker count and run; each run after the first with its overhead against the first."""
    from rich.markup import escape
    from rich.table import Table

    differences = setup_differences(runs)
    if differences:
        console.print("Set-ups differ, so the overheads include these differences:", markup=False)
        for difference in differences:
            console.print(f"  {difference}", markup=False)
    table = Table(title=f"images/s (total) against {escape(runs[0].label)}")
    table.add_column("workers", justify="right")
    for run in runs:
        table.add_column(escape(run.label), justify="right")
    for row in rows:
        table.add_row(str(row["workers"]), *cells(row))
    console.print(table)
    console.print("in brackets: each run's overhead against the first, (first - run) / first", markup=False)
