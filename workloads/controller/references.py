"""Published figures to judge a run by, and the ReFrame-style judgement itself.

A reference is (target, lower, upper, unit) for a GPU model, a network and a worker count (the total
images/s of a run) or for one GPU (``images_per_second_per_gpu``: each worker's images/s, per batch
size, precision and compiled or eager); the inventory's ``training.references`` come first, the tables
here second. A metric with no reference is recorded, never failed; each worker is also judged
against its same-model mates (:func:`slow_mates`), which needs no reference.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from gpuready.core.settings.training import Reference

#: Dell's vSphere study (Dell, vSphere 7 on R750xa): tf_cnn_benchmarks ResNet-50, batch 1024 per GPU, synthetic
#: data, one VM with one A100 PCIe per node, Horovod over MPI (weak scaling, images/s).
#: Dell's bare-metal vs Kubernetes study publish CheXNet only as a figure (bare metal about 8% ahead of Kubernetes at 8
#: GPUs): a relation between two runs, which `gpuready report compare` shows, not a target.
PUBLISHED: tuple[Reference, ...] = (
    Reference(gpu_model="NVIDIA A100-PCIE-40GB", model="resnet50", gpus=1, target=2757.21, lower=-0.05),
    Reference(gpu_model="NVIDIA A100-PCIE-40GB", model="resnet50", gpus=2, target=5391.75, lower=-0.05),
    Reference(gpu_model="NVIDIA A100-PCIE-40GB", model="resnet50", gpus=4, target=10675.09, lower=-0.05),
)

PER_GPU = "images_per_second_per_gpu"
_H100_RUNBOOK = (
    "gpuready's GPU runbook (benchmarks/gpu/runbook.sh) on one H100 80GB HBM3 SXM5, driver 580.159.04, "
    "torch 2.11.0+cu130, synthetic data, 224 px"
)
#: One GPU's images/s for CheXNet's DenseNet-121 with bf16 autocast and channels_last, by batch size, as
#: measured in this project (BENCHMARKS.md, "GPU runbook and the PyTorch path"). Only batch 256: below it a
#: step is bound by the host launching kernels (64: 587-938 images/s across sittings), too noisy to judge.
#: The lower bound is 20% below, as the median-of-mates rule's 80%.
PER_GPU_PUBLISHED: tuple[Reference, ...] = (
    Reference(
        gpu_model="NVIDIA H100 80GB HBM3",
        model="densenet121",
        metric=PER_GPU,
        batch_size=256,
        image_size=224,
        precision="bf16",
        compiled=False,
        target=1950.0,
        lower=-0.2,
        source=f"{_H100_RUNBOOK}, eager: 1906.8-1983.2 images/s in six runs on 2026-11-26 and 1,959 on "
        "2026-11-27 (median 1950)",
    ),
    Reference(
        gpu_model="NVIDIA H100 80GB HBM3",
        model="densenet121",
        metric=PER_GPU,
        batch_size=256,
        image_size=224,
        precision="bf16",
        compiled=True,
        target=3703.0,
        lower=-0.2,
        source=f"{_H100_RUNBOOK}, 2026-11-27: a plain torchvision DenseNet-121 loop with torch.compile and "
        "Adam(fused=True), 3,703 images/s",
    ),
)

#: a worker below this fraction of the median of its same-model mates fails, reference or not
MATES_FLOOR = 0.8


def find(
    references: list[Reference] | tuple[Reference, ...],
    *,
    gpu_model: str,
    model: str,
    gpus: int | None = None,
    metric: str = "images_per_second",
    batch_size: int | None = None,
    image_size: int | None = None,
    precision: str = "",
    compiled: bool | None = None,
) -> Reference | None:
    """The most specific match: exact GPU model before ``*``; the inventory's before the published tables."""

    def fits(r: Reference) -> bool:
        return (
            r.metric == metric
            and (r.gpus is None or r.gpus == gpus)
            and r.model in (model, "*")
            and (r.gpu_model == "*" or (bool(gpu_model) and r.gpu_model == gpu_model))
            and (r.batch_size is None or r.batch_size == batch_size)
            and (r.image_size is None or r.image_size == image_size)
            and r.precision in ("*", precision)
            and (r.compiled is None or r.compiled == compiled)
        )

    for table in (references, PUBLISHED, PER_GPU_PUBLISHED):
        candidates = [r for r in table if fits(r)]
        candidates.sort(key=lambda r: (r.gpu_model == "*", r.model == "*"))
        if candidates:
            return candidates[0]
    return None


@dataclass(frozen=True)
class Verdict:
    ok: bool | None  # None: no reference, recorded only
    message: str


def lower_bound(ref: Reference) -> float:
    return ref.target * (1 + ref.lower)


def judge(value: float, ref: Reference | None) -> Verdict:
    if ref is None:
        return Verdict(None, f"{value:.1f} images/s recorded (no reference)")
    low = lower_bound(ref)
    high = ref.target * (1 + ref.upper) if ref.upper is not None else None
    bounds = f"[{low:.1f}, {'∞' if high is None else f'{high:.1f}'}] {ref.unit}"
    ok = value >= low and (high is None or value <= high)
    what = f"{ref.gpus} GPU{'s' if ref.gpus > 1 else ''}" if ref.gpus else "per GPU"
    return Verdict(
        ok,
        f"{value:.1f} {ref.unit} vs reference {ref.target:g} {ref.unit} ({ref.gpu_model}, "
        f"{what}): {'within' if ok else 'outside'} {bounds}",
    )


@dataclass(frozen=True)
class Slow:
    """A worker below ``MATES_FLOOR`` of the median of the other workers on the same GPU model."""

    rank: int
    value: float
    mates_median: float
    mates: int


def slow_mates(workers: list[dict[str, Any]]) -> list[Slow]:
    """Workers ({rank, gpu_model, value}) below 80% of the median of their same-model mates (themselves left
    out, so two GPUs are enough to catch one at half speed). A model with one worker has no mates."""
    slow = []
    for w in workers:
        mates = [m["value"] for m in workers if m["gpu_model"] == w["gpu_model"] and m["rank"] != w["rank"]]
        if mates:
            median = statistics.median(mates)
            if w["value"] < MATES_FLOOR * median:
                slow.append(Slow(w["rank"], w["value"], median, len(mates)))
    return slow
