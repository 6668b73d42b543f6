"""A measured figure's two judges, shared by the node checks and the training: the reference measured the same
way, and the figure's mates (the other GPUs of the same model measured by the same check in the same run)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: A GPU below this share of its mates' median fails: gpuready's choice, set between what healthy mates differ
#: by and what a straggler is. GPUs of one model in one node differ by a few percent ("on the same 8-GPU node you
#: can see 5%+ MAMF spread": stas00/ml-engineering compute/accelerator/README.md@744d01e1 line 417; eight
#: GPUs spread evenly over 5% leave the slowest at 97% of its mates' median; nvbandwidth's eight RTX 4090 host copies
#: span 23.9-26.4 GB/s, the lowest at 92% of its mates' median; DCGM issue #122's healthy A100s 19.10-19.27 TF),
#: so 85% passes them, and fails a GPU 20% below its mates (80%) or at half speed. DCGM's own rule of this
#: kind, the diagnostic plugin's gflops_tolerance_pcnt, is off by default (0.0, DiagnosticPlugin.cpp), so it
#: offers no value to adopt. tests/unit/node/test_dcgm_perf.py proves both sides for the node checks; the training
#: route judges its workers' images/s by the same rule.
MATES_FRACTION = 0.85


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
