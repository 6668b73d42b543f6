"""The figures of a sweep, computed only from the workers' raw step times, so anyone can recompute them.

Per worker: images/s = batch size x timed steps / sum of its step times. Per size: the total is
the sum over workers, per worker is the total / workers, and the weak-scaling efficiency is
per-worker images/s against the 1-worker run's. Each worker's own images/s is kept too, with its rank, host
and GPU (when the worker reported one), so a slow GPU shows beside its mates.
"""

from __future__ import annotations

import statistics
from typing import Any


def worker_images_per_second(rank: dict[str, Any]) -> float:
    steps: list[float] = rank["step_times"]
    return float(rank["batch_size"]) * len(steps) / sum(steps)


def rank_figures(rank: dict[str, Any]) -> dict[str, Any]:
    """One worker's images/s and whose it is: rank, host, and the GPU index where the worker reported one."""
    row: dict[str, Any] = {"rank": rank["rank"], "host": str(rank.get("host") or "")}
    if rank.get("gpu_index") is not None:
        row["gpu"] = rank["gpu_index"]
    row["images_per_second"] = round(worker_images_per_second(rank), 3)
    return row


def size_figures(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(worker_images_per_second(r) for r in ranks)
    return {
        "workers": len(ranks),
        "images_per_second": round(total, 3),
        "images_per_second_per_worker": round(total / len(ranks), 3),
        "step_time_median_s": round(statistics.median(t for r in ranks for t in r["step_times"]), 6),
        "ranks": [rank_figures(r) for r in sorted(ranks, key=lambda r: r["rank"])],
    }


def sweep_figures(runs: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per size, in order, with efficiency against the 1-worker run when the sweep had one."""
    rows = [size_figures(ranks) for _, ranks in sorted(runs.items())]
    base = next((r["images_per_second_per_worker"] for r in rows if r["workers"] == 1), None)
    for row in rows:
        row["efficiency"] = round(row["images_per_second_per_worker"] / base, 4) if base else None
    return rows
