"""Published figures to judge a run by, and the ReFrame-style judgement itself.

A reference is (target, lower, upper, unit) for a GPU model, a model and a worker count; the
inventory's ``training.references`` come first, this table of the seeds' figures second. A
metric with no reference is recorded, never failed.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def find(
    references: list[Reference] | tuple[Reference, ...],
    *,
    gpu_model: str,
    model: str,
    gpus: int,
    metric: str = "images_per_second",
) -> Reference | None:
    """The most specific match: exact GPU model before ``*``; the inventory's before the published table."""
    for table in (references, PUBLISHED):
        candidates = [
            r
            for r in table
            if r.gpus == gpus
            and r.metric == metric
            and r.model in (model, "*")
            and (r.gpu_model == "*" or (gpu_model and r.gpu_model == gpu_model))
        ]
        candidates.sort(key=lambda r: (r.gpu_model == "*", r.model == "*"))
        if candidates:
            return candidates[0]
    return None


@dataclass(frozen=True)
class Verdict:
    ok: bool | None  # None: no reference, recorded only
    message: str


def judge(value: float, ref: Reference | None) -> Verdict:
    if ref is None:
        return Verdict(None, f"{value:.1f} images/s recorded (no reference)")
    low = ref.target * (1 + ref.lower)
    high = ref.target * (1 + ref.upper) if ref.upper is not None else None
    bounds = f"[{low:.1f}, {'∞' if high is None else f'{high:.1f}'}] {ref.unit}"
    ok = value >= low and (high is None or value <= high)
    return Verdict(
        ok,
        f"{value:.1f} {ref.unit} vs reference {ref.target:g} {ref.unit} ({ref.gpu_model}, "
        f"{ref.gpus} GPU{'s' if ref.gpus > 1 else ''}): {'within' if ok else 'outside'} {bounds}",
    )
