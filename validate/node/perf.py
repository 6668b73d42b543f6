"""Judging measured figures: the median of several samples, the model's reference, the GPU's mates.

Two rules, both applied (neither anchor alone combines them):
- a GPU (pair, node) whose median is below the model's lower bound fails (references.py);
- a GPU whose median is below :data:`MATES_FRACTION` of the median of its same-model mates fails: the
  other GPUs of its node here, the other GPUs of the whole run in :func:`across_run`. Peers catch a slow
  GPU where no reference row exists (NVIDIA/DCGM issue #122: an A100 at 6.7 TF FP32 beside mates at 19.2 TF
  had passed ``dcgmi diag --run xlong``).
A GPU with other processes on it is never judged passed: the check names the process.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuready.core.perf import MATES_FRACTION, below_mates
from gpuready.core.results import Check
from gpuready.validate.node import references
from gpuready.validate.node.nvsmi import Gpu


@dataclass
class Figure:
    """One measured figure: what it belongs to (a GPU, a GPU pair, the node) and its samples."""

    label: str
    model: str
    samples: list[float]
    gpu: Gpu | None = None
    busy: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def describe(self, unit: str) -> str:
        low, high = min(self.samples), max(self.samples)
        return (
            f"{self.label}: median {self.median:.4g} {unit} of {len(self.samples)} sample(s), "
            f"spread {high - low:.3g} ({low:.4g}..{high:.4g})"
        )


@dataclass
class PerfCheck(Check):
    """A performance check's result with the figures it judged (for the run-wide mates; not reported)."""

    figures: list[Figure] = field(default_factory=list, repr=False)
    metric: str = ""
    #: Whether each figure belongs to one GPU (mates apply) or to a pair/the node.
    per_gpu: bool = True
    #: Labels of the figures that already failed on their node (the run-wide rule does not repeat them).
    failing: set[str] = field(default_factory=set, repr=False)

    def plain(self) -> Check:
        return Check(self.id, self.host, self.status, self.message, self.evidence, self.remedy)


def busy(gpus: Sequence[Gpu]) -> str:
    """Who holds these GPUs now, or empty: ``pid 4242 python3 (30000 MiB)`` for one GPU (its figure's label
    already names it), ``GPU 2 (bus): pid 4242 python3 (30000 MiB)`` for a pair or the node."""
    if len(gpus) == 1:
        return ", ".join(p.describe() for p in gpus[0].compute_processes)
    held = [
        f"GPU {g.index} ({g.bus_id}): " + ", ".join(p.describe() for p in g.compute_processes)
        for g in gpus
        if g.compute_processes
    ]
    return "; ".join(held)


def judge(
    id: str,
    host: str,
    metric: str,
    figures: list[Figure],
    source: str,
    *,
    overrides: Mapping[str, float] | None = None,
    per_gpu: bool = True,
) -> PerfCheck:
    """The verdict over ``figures`` (measured by ``source``): failed when any is busy, below its lower bound
    or (per GPU) below :data:`MATES_FRACTION` of its same-model mates' median."""
    unit = references.METRICS[metric]
    problems, evidence, recorded = [], [f"measured by {source}"], []
    failing: set[str] = set()
    for figure in figures:
        ref = references.lookup(figure.model, metric, figure.gpu, overrides)
        evidence.append(figure.describe(unit) + (f" — reference: {ref.describe()}" if ref else ""))
        if figure.busy:
            problems.append(f"{figure.label} is busy, not judged: {figure.busy}")
            failing.add(figure.label)
            continue
        why = []
        if ref is not None and figure.median < ref.lower:
            why.append(f"below the {figure.model} lower bound {ref.lower:g} {unit}")
        mates = [f.median for f in figures if f is not figure and f.model == figure.model and not f.busy]
        middle = below_mates(figure.median, mates) if per_gpu else None
        if middle is not None:
            why.append(
                f"below {MATES_FRACTION:.0%} of its {len(mates)} mate(s)' median {middle:.4g} {unit} on this node"
            )
        if ref is None and not (per_gpu and mates):
            recorded.append(figure.label)
        if why:
            problems.append(f"{figure.label}: {figure.median:.4g} {unit} " + " and ".join(why))
            failing.add(figure.label)
    result = PerfCheck(id, host, "passed", evidence="\n".join(evidence), figures=figures, metric=metric)
    result.per_gpu, result.failing = per_gpu, failing
    if problems:
        result.status, result.message = "failed", "; ".join(problems)
        return result
    low = min(figures, key=lambda f: f.median)
    summary = f"{len(figures)} figure(s), lowest {low.median:.4g} {unit} ({low.label})"
    if recorded and len(recorded) == len(figures):
        result.message = f"{summary}: no reference for {figures[0].model} and no mates (recorded, not judged)"
    else:
        ref = references.lookup(low.model, metric, low.gpu, overrides)
        bound = f", lower bound {ref.lower:g} {unit}" if ref else ""
        rule = f"; each at least {MATES_FRACTION:.0%} of its mates' median" if per_gpu and len(figures) > 1 else ""
        result.message = f"{summary}{bound}{rule}"
    return result


def across_run(checks: list[Check]) -> list[Check]:
    """Apply the mates rule across every host of the run, per check and GPU model; return plain checks.

    A GPU measured passing on its node fails when its median is below :data:`MATES_FRACTION` of the median
    of every other GPU of its model measured by the same check in this run (busy GPUs left out).
    """
    groups: dict[tuple[str, str], list[tuple[PerfCheck, Figure]]] = {}
    for check in checks:
        if isinstance(check, PerfCheck) and check.per_gpu and check.status in ("passed", "failed"):
            for figure in check.figures:
                if not figure.busy:
                    groups.setdefault((check.id, figure.model), []).append((check, figure))
    for members in groups.values():
        hosts = {c.host for c, _ in members}
        if len(hosts) < 2:
            continue
        values = [f.median for _, f in members]
        for n, (check, figure) in enumerate(members):
            others = values[:n] + values[n + 1 :]
            middle = below_mates(figure.median, others)
            if middle is None or figure.label in check.failing:
                continue
            unit = references.METRICS[check.metric]
            problem = (
                f"{figure.label}: {figure.median:.4g} {unit} below {MATES_FRACTION:.0%} of the run's "
                f"median {middle:.4g} {unit} ({len(others)} {figure.model} mate(s) on {len(hosts)} hosts)"
            )
            check.message = problem if check.status == "passed" else f"{check.message}; {problem}"
            check.status = "failed"
    return [c.plain() if isinstance(c, PerfCheck) else c for c in checks]
