"""Training figures' references: only figures measured by gpuready's own smoke run, each row saying what the run
was (GPU, network, batch, image size, precision, compiled or eager), its figure and the run it came from.

A row is a :class:`Conditions` (what the figure was measured under) and a :class:`~gpuready.core.perf.Reference`
(the figure and its bounds), as the node checks' table is a (model, metric) and a Reference. The inventory's
``training.references`` are looked up first, this table second. A figure with no reference is recorded, not
judged; each GPU is also judged against its same-model mates (:func:`gpuready.core.perf.below_mates`), which
needs no reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from gpuready.core.perf import Reference
from gpuready.core.settings.training import TrainingReference

#: the total images/s of a run of ``gpus`` workers
TOTAL = "images_per_second"
#: one worker's (one GPU's) images/s
PER_GPU = "images_per_second_per_gpu"
UNIT = "images/s"


@dataclass(frozen=True)
class Conditions:
    """What a training figure was measured under; a reference judges only a run measured the same way.
    Unset (None, ``*``) on a reference row: any."""

    gpu_model: str
    model: str
    metric: str = PER_GPU
    gpus: int | None = None
    batch_size: int | None = None
    image_size: int | None = None
    precision: str = "*"
    compiled: bool | None = None

    def admits(self, run: Conditions) -> bool:
        """Whether a row with these conditions applies to ``run`` (whose fields are all set)."""
        return (
            self.metric == run.metric
            and (self.gpus is None or self.gpus == run.gpus)
            and self.model in (run.model, "*")
            and (self.gpu_model == "*" or (bool(run.gpu_model) and self.gpu_model == run.gpu_model))
            and (self.batch_size is None or self.batch_size == run.batch_size)
            and (self.image_size is None or self.image_size == run.image_size)
            and self.precision in ("*", run.precision)
            and (self.compiled is None or self.compiled == run.compiled)
        )

    def describe(self) -> str:
        what = f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}" if self.gpus else "per GPU"
        return f"{self.gpu_model}, {what}"


Row = tuple[Conditions, Reference]

_H100 = "NVIDIA H100 80GB HBM3"
#: The lower bound of a gpuready row: 20% below its figure, as the mates' rule's 80%.
LOWER = -0.2


def _measured(conditions: Conditions, figure: float, run: str) -> Row:
    return conditions, Reference(figure, round(figure * (1 + LOWER), 1), UNIT, run)


#: One GPU's images/s as gpuready's own smoke run measured it (BENCHMARKS.md, "GPU runbook and the PyTorch path").
#: Only batch 256: below it a step is bound by the host launching kernels (64: 587-938 images/s across sittings),
#: too noisy to judge. A figure that gpuready's own run did not measure (a hand-written training loop, another
#: program, a vendor's study) is no row here: it measures something else.
TABLE: tuple[Row, ...] = (
    _measured(
        Conditions(_H100, "densenet121", PER_GPU, batch_size=256, image_size=224, precision="bf16", compiled=False),
        1950.0,
        "gpuready validate training --framework pytorch --gpus 1 --mixed-precision --batch-size 256 (eager, "
        "synthetic data) in the GPU runbook (benchmarks/gpu/runbook.sh) on one H100 80GB HBM3 SXM5, driver "
        "580.159.04, torch 2.11.0+cu130: 1906.8-1983.2 images/s in six runs on 2026-11-26 and 1,959 on 2026-11-27 "
        "(median 1950)",
    ),
)


def from_settings(row: TrainingReference) -> Row:
    """An inventory row, whose bounds are fractions of its target (ReFrame's form), as a table row."""
    # The inventory row names its conditions as Conditions does, so a condition added there is read here too.
    conditions = Conditions(**{field.name: getattr(row, field.name) for field in fields(Conditions)})
    upper = row.target * (1 + row.upper) if row.upper is not None else None
    source = row.source or "the inventory's training.references"
    return conditions, Reference(row.target, row.target * (1 + row.lower), row.unit, source, upper)


def find(inventory: Sequence[TrainingReference], run: Conditions) -> Row | None:
    """The most specific row for ``run``: exact GPU model before ``*``, exact network before ``*``; the
    inventory's rows before gpuready's."""
    for table in ([from_settings(r) for r in inventory], TABLE):
        candidates = [row for row in table if row[0].admits(run)]
        candidates.sort(key=lambda row: (row[0].gpu_model == "*", row[0].model == "*"))
        if candidates:
            return candidates[0]
    return None
