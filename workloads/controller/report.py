"""The training report: the scaling table, the scaling curve as a PNG, and the raw step times beside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RAW_FILE = "step_times.json"
PLOT_FILE = "scaling.png"
REPORT_FILE = "training.md"


def save_raw(folder: Path, runs: dict[int, list[dict[str, Any]]]) -> Path:
    """Every worker's result as it printed it: the source of every figure in the report."""
    path = folder / RAW_FILE
    path.write_text(json.dumps({str(k): v for k, v in sorted(runs.items())}, indent=1) + "\n")
    return path


def load_raw(folder: Path) -> dict[int, list[dict[str, Any]]]:
    return {int(k): v for k, v in json.loads((folder / RAW_FILE).read_text()).items()}


def workers_label(rows: list[dict[str, Any]]) -> str:
    """What a worker was: a CPU run never reads as a GPU one."""
    return "workers (CPU processes)" if any(r.get("device") == "CPU" for r in rows) else "workers (GPUs)"


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    fig = figure(rows, title)
    fig.savefig(path)
    plt.close(fig)
    return path


def figure(rows: list[dict[str, Any]], title: str) -> Any:
    """The scaling curve as a matplotlib figure; one legend for both axes, below them, where no marker can be
    (a legend inside the axes sat on a marker: its place depends on the figures)."""
    import matplotlib.pyplot as plt

    workers = [r["workers"] for r in rows]
    # constrained layout makes room for a legend placed "outside" (matplotlib >= 3.7, Figure.legend).
    fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=110, layout="constrained")
    ax.plot(workers, [r["images_per_second"] for r in rows], "o-", color="tab:blue", label="measured images/s")
    if rows[0]["workers"] == 1:
        ideal = rows[0]["images_per_second"]
        ax.plot(workers, [ideal * w for w in workers], "--", color="tab:gray", label="linear scaling")
    ax.set_ylim(bottom=0)
    ax.set_xlabel(workers_label(rows))
    ax.set_ylabel("images/s (total)")
    ax.set_xticks(workers)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if any(r["efficiency"] is not None for r in rows):
        eff = ax.twinx()
        eff.plot(workers, [100 * (r["efficiency"] or 0) for r in rows], "s:", color="tab:orange", label="efficiency")
        eff.set_ylabel("weak-scaling efficiency (%)")
        eff.set_ylim(0, 110)
        more, names = eff.get_legend_handles_labels()
        handles, labels = handles + more, labels + names
    fig.legend(handles, labels, loc="outside lower center", ncols=len(handles), frameon=False)
    ax.set_title(title)
    return fig


def _compile(r: dict[str, Any]) -> str:
    return f"{r['compile_s']:.1f}" if r.get("compile_s") is not None else "—"


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"| {workers_label(rows)} | images/s | images/s per worker | efficiency | median step (s) | first step "
        "beyond a step (s) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        eff = "—" if r["efficiency"] is None else f"{100 * r['efficiency']:.1f}%"
        lines.append(
            f"| {r['workers']} | {r['images_per_second']:.2f} | {r['images_per_second_per_worker']:.2f} "
            f"| {eff} | {r['step_time_median_s']:.4f} | {_compile(r)} |"
        )
    return lines


def write(folder: Path, rows: list[dict[str, Any]], setup: dict[str, Any]) -> Path:
    cpu = "CPU · " if str(setup.get("device", "")).startswith("CPU") else ""
    title = (
        f"{cpu}{setup['model']} · batch {setup['batch_size']}/worker · {setup['image_size']}px · {setup['launcher']}"
    )
    try:
        plot(rows, folder / PLOT_FILE, title)
        curve = f"![scaling curve]({PLOT_FILE})"
    except ImportError:  # a GPU machine given only the node checks' wheels: the table and raw times still stand
        curve = "(no scaling curve: matplotlib is not installed)"
    lines = [
        f"# Training scaling: {title}",
        "",
        *[f"- {k}: {v}" for k, v in setup.items()],
        "",
        *table(rows),
        "",
        curve,
        "",
        f"Every figure is computed from `{RAW_FILE}` (each worker's timed step durations, warm-up excluded): "
        "images/s of a worker = batch size x steps / sum of its step times; a size's total is the sum over "
        "its workers; efficiency = images/s per worker / that of 1 worker. The first step (compiling, with "
        "torch.compile or XLA) is never timed; the last column is how much longer it took than a timed step.",
    ]
    path = folder / REPORT_FILE
    path.write_text("\n".join(lines) + "\n")
    return path


def show(console: Any, rows: list[dict[str, Any]], folder: Path) -> None:
    """The scaling table on the terminal, and where the report and the plot are."""
    from rich.table import Table

    cpu = any(r.get("device") == "CPU" for r in rows)
    table = Table(title=f"scaling {'on CPU, not GPUs ' if cpu else ''}(from the raw step times)")
    for column in ("CPU workers" if cpu else "GPUs", "images/s", "per worker", "efficiency", "compile (s)"):
        table.add_column(column, justify="right")
    for r in rows:
        eff = "—" if r["efficiency"] is None else f"{100 * r['efficiency']:.1f}%"
        table.add_row(
            str(r["workers"]),
            f"{r['images_per_second']:.2f}",
            f"{r['images_per_second_per_worker']:.2f}",
            eff,
            _compile(r),
        )
    console.print(table)
    plot = folder / PLOT_FILE
    console.print(f"report: {folder / REPORT_FILE}" + (f"  plot: {plot}" if plot.exists() else ""))
