"""A measured figure's two judges, shared by the node checks and the training: the reference measured the same
way, and the figure's mates (the other GPUs of the same model measured by the same check in the same run)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: A GPU below this share of its mates' median fails: gpuready's choice, far below the spread of healthy
#: mates in the recordings (nvbandwidth's eight RTX 4090 host copies span 23.9-26.4 GB/s, 91% of their
#: median; DCGM issue #122's healthy A100s 19.10-19.27 TF) and above a GPU at half speed.
MATES_FRACTION = 0.8


@dataclass(frozen=True)
class Reference:
    """The figure a metric is judged against: it passes from ``lower`` (and up to ``upper``, where one is set)."""

    target: float
    lower: float
    unit: str
    source: str
    upper: float | None = None

    def admits(self, value: float) -> bool:
        return value >= self.lower and (self.upper is None or value <= self.upper)

    def describe(self) -> str:
        upper = f", upper bound {self.upper:g} {self.unit}" if self.upper is not None else ""
        return f"target {self.target:g} {self.unit}, lower bound {self.lower:g} {self.unit}{upper} ({self.source})"


def below_mates(value: float, mates: Sequence[float]) -> float | None:
    """The median of ``mates`` when ``value`` is below :data:`MATES_FRACTION` of it; None when it is not, or when
    there are no mates (a figure is never its own mate: the caller leaves it out, and busy GPUs with it)."""
    if not mates:
        return None
    middle = statistics.median(mates)
    return middle if value < MATES_FRACTION * middle else None
