"""Measured figures of a run (a GPU's memory bandwidth, a training size's images/s), kept as data.

A command records each figure with :func:`record` into ``RunResult.metrics["figures"]``: what was
measured, its value in the unit the reports show it in, and labels saying whose it is (host, GPU,
check). summary.json keeps them; ``--metrics`` writes them for Prometheus in base units
(:mod:`gpuready.core.report.metrics`).
"""

from __future__ import annotations

import re
from typing import Any

from gpuready.core.results import RunResult

KEY = "figures"

#: The units figures are recorded in -> (Prometheus name suffix, factor to the base unit). Prometheus names
#: carry their unit, in base units (bytes, seconds, ratios 0..1): https://prometheus.io/docs/practices/naming/
UNITS: dict[str, tuple[str, float]] = {
    "GB/s": ("bytes_per_second", 1e9),
    "TFLOP/s": ("flops", 1e12),
    "images/s": ("images_per_second", 1.0),
    "s": ("seconds", 1.0),
    "ratio": ("ratio", 1.0),
    "links": ("links", 1.0),
    "GPUs": ("gpus", 1.0),
    "hosts": ("hosts", 1.0),
    "VMs": ("vms", 1.0),
}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_LABEL = re.compile(r"^[a-z][a-z0-9_]*$")


def record(result: RunResult, name: str, unit: str, value: float, **labels: object) -> None:
    """Add one figure: ``name`` says what (snake_case, no unit: ``memory_bandwidth``), ``unit`` is a key of
    :data:`UNITS`, ``labels`` whose it is (``host``, ``gpu``, ``check``; values become strings)."""
    if not _NAME.match(name):
        raise ValueError(f"figure name {name!r} is not snake_case")
    if unit not in UNITS:
        raise ValueError(f"figure {name}: unit {unit!r} is not one of {', '.join(UNITS)}")
    if bad := [k for k in labels if not _LABEL.match(k)]:
        raise ValueError(f"figure {name}: label names {bad} are not snake_case")
    item: dict[str, Any] = {"name": name, "unit": unit, "value": value}
    item["labels"] = {k: str(v) for k, v in labels.items() if v is not None and v != ""}
    result.metrics.setdefault(KEY, []).append(item)


def recorded(result: RunResult) -> list[dict[str, Any]]:
    figures = result.metrics.get(KEY)
    return figures if isinstance(figures, list) else []
