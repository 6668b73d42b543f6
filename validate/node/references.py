"""Reference figures per GPU model, kept in one table (as ReFrame keeps its references).

A row is (model pattern, metric) -> target, lower bound, unit, source, read from the sheet
``reference_figures.tsv`` beside this module (and DCGM's own floors, below). Patterns are matched against
nvidia-smi's product name, first match wins, so specific rows come before general ones. A node class
overrides a lower bound with ``references: {metric: value}``. A metric with no row for the node's model
is judged against the GPU's same-model mates only; with no mates either it is recorded and says so.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuready.core.perf import Reference
from gpuready.validate.node.sheets import table

if TYPE_CHECKING:
    from gpuready.validate.node.nvsmi import Gpu


#: Metrics the performance checks judge, with their unit.
METRICS = {
    "matmul_tflops": "TFLOP/s",
    "memory_bandwidth": "GB/s",
    "h2d_bandwidth": "GB/s",
    "d2h_bandwidth": "GB/s",
    "p2p_bandwidth": "GB/s",
    "nccl_allreduce_busbw": "GB/s",
    "nvlink_links": "links",
    # Measured by DCGM's diagnostic plugins (dcgmi diag), judged only against DCGM's own per-SKU floors.
    "dcgm_stress_tflops": "TFLOP/s",
    "dcgm_memory_bandwidth": "GB/s",
    "dcgm_h2d_bandwidth": "GB/s",
    "dcgm_d2h_bandwidth": "GB/s",
}

#: Copy bandwidths a PCIe link bounds, whichever tool measured them (the link rule below applies to each).
HOST_COPY_METRICS = ("h2d_bandwidth", "d2h_bandwidth", "dcgm_h2d_bandwidth", "dcgm_d2h_bandwidth")

# PCI-SIG raw rates for x16 per direction: gen3 8 GT/s -> 15.75 GB/s, gen4 16 GT/s -> 31.5 GB/s,
# gen5 32 GT/s -> 63 GB/s (128b/130b encoding). A host-to-device copy reaches about 80% of it after
# packet overhead; the lower bound, 70%, is gpuready's choice, not a vendor figure.
_PCIE_RAW = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
PCIE_SOURCE = "PCI-SIG raw x16 rate; target 80%, lower bound 70% (gpuready)"

#: The share of a data-sheet peak below which a GPU fails: gpuready's choice, low enough that a healthy
#: GPU measured by a plain kernel passes (a CUDA vector add reached 2,761 of the H100 SXM's 3,350 GB/s:
#: 82%), high enough that a GPU at half speed fails; the median-of-mates rule catches what is between.
PEAK_FLOOR = 0.6


def _peak(value: float, unit: str, source: str) -> Reference:
    return Reference(value, round(value * PEAK_FLOOR, 1), unit, f"{source}; lower bound {PEAK_FLOOR:.0%} (gpuready)")


#: Measured achievable figures, and the share of one a GPU may fall to before it fails: gpuready's choice. The
#: figure is another run's best (MAMF: the best of a search over shapes; BabelStream's copy kernel); gpuready's
#: probe measures one 8192^3 product through torch and a torch device copy, which reach somewhat less (Azure's
#: ND A100 v4 FP16 cuBLASLt at 8192^3: 253.7 TFLOP/s, 93.5% of the A100 SXM's MAMF of 271.2), so 80% of the
#: figure; a GPU at 80% of its mates fails the mates' rule anyway.
ACHIEVED_FLOOR = 0.8


def _achieved(value: float, unit: str, source: str) -> Reference:
    lower = round(value * ACHIEVED_FLOOR, 1)
    return Reference(value, lower, unit, f"{source}; lower bound {ACHIEVED_FLOOR:.0%} (gpuready)")


#: DCGM's own per-SKU floors: NVIDIA/DCGM ``nvvs/diag-skus.yaml.in`` at commit
#: 72fa3feaa67d716a75323a8f47c34ff3ee73f824 (DCGM 4.6.0, Apache-2.0), the file DCGM's diagnostics judge with.
_DCGM_SKUS = "NVIDIA/DCGM nvvs/diag-skus.yaml.in@72fa3fe"
#: targeted_stress fails a GPU whose best GEMM rate is below target_perf_min_ratio (0.95, the default in
#: nvvs/plugin_src/targetedstress/TargetedStress_wrapper.cpp) of the SKU's target_stress (SGEMM GFLOP/s
#: where use_dgemm is false, DGEMM where true); DCGM further discounts the target by the share of the test's
#: time spent copying, which gpuready cannot see, so gpuready's bound can only be stricter than DCGM's.
DCGM_TARGET_PERF_MIN_RATIO = 0.95


def _dcgm(
    line: int, sku: str, target_stress: float, dgemm: bool, line_bw: int, minimum_bandwidth_mb: float
) -> dict[str, Reference]:
    """A SKU's two DCGM floors: targeted_stress's GEMM rate (GFLOP/s there, TFLOP/s here) and memory_bandwidth's
    minimum_bandwidth (MB/s there, GB/s here)."""
    gemm = "DGEMM" if dgemm else "SGEMM"
    stress = target_stress / 1000
    return {
        "dcgm_stress_tflops": Reference(
            stress,
            round(stress * DCGM_TARGET_PERF_MIN_RATIO, 2),
            "TFLOP/s",
            f"{_DCGM_SKUS} line {line} ({sku}: targeted_stress target_stress {target_stress:g} GFLOP/s {gemm}); "
            f"lower bound x{DCGM_TARGET_PERF_MIN_RATIO} (target_perf_min_ratio)",
        ),
        "dcgm_memory_bandwidth": Reference(
            minimum_bandwidth_mb / 1000,
            minimum_bandwidth_mb / 1000,
            "GB/s",
            f"{_DCGM_SKUS} line {line_bw} ({sku}: memory_bandwidth minimum_bandwidth {minimum_bandwidth_mb:g} MB/s)",
        ),
    }


#: nvidia-smi product name -> DCGM's floors for the SKU of that name (DCGM matches by PCI device id, given in
#: each source). The H200 (2335) row's minimum_bandwidth reads 2333, which the file's own comment derives as
#: "dcgmproftester -t 1005 shows 3110. Multiply by .75": a GB/s figure in an MB/s field; gpuready reads it as
#: 2,333 GB/s (2,333,000 MB/s), as every other row of the file is scaled.
DCGM_ROWS: dict[str, dict[str, Reference]] = {
    "NVIDIA H100 80GB HBM3": _dcgm(150, "H100 80GB HBM3, id 2330", 29250, False, 174, 1905000),
    "NVIDIA H100 NVL": _dcgm(3043, "H100NVL, id 2321", 25575, False, 3066, 2043000),
    "NVIDIA H200 NVL": _dcgm(3604, "H200, id 233b", 32218, False, 3625, 2212500),
    "NVIDIA H200": _dcgm(3533, "H200, id 2335", 37500, False, 3554, 2333000),
    "NVIDIA B200": _dcgm(4092, "B200, id 2901", 36949, False, 4116, 4072500),
    "NVIDIA GB200": _dcgm(3931, "B200 DevId 10DE, id 2941", 15225, False, 3955, 2602500),
    "NVIDIA GB300": _dcgm(4263, "GB300 NVL Bianca, id 31c2", 48750, False, 4287, 4522500),
    "NVIDIA A100-SXM4-80GB": _dcgm(1594, "A100-SXM4-80GB, id 20b2", 6975, True, 1617, 1173000),
    "NVIDIA A100-PCIE-40GB": _dcgm(1558, "A100 PCIe, id 20f1", 5963, True, 1581, 969750),
    "NVIDIA L40S": _dcgm(3191, "NVIDIA L40S, id 26b9", 30000, False, 3209, 525000),
    "NVIDIA L4": _dcgm(2935, "Nvidia L4, id 27b8", 8700, False, 2958, 198500),
}


def _reference(row: Mapping[str, str]) -> Reference:
    """A row of the sheet: its kind says how its figure bounds a GPU."""
    figure, unit, source = float(row["figure"]), row["unit"], row["source"]
    if row["kind"] == "peak":
        return _peak(figure, unit, source)
    if row["kind"] == "achieved":
        return _achieved(figure, unit, source)
    if row["kind"] == "floor":
        return Reference(figure, figure, unit, source)
    raise ValueError(f"reference_figures.tsv: {row['GPU model']} {row['metric']}: unknown kind {row['kind']!r}")


#: (model pattern, metric) -> Reference: the sheet reference_figures.tsv (dense, not sparse, Tensor Core TFLOP/s in
#: BF16, FP16 on Volta, which has no BF16; memory, copy and all-reduce bandwidths; NVLink links per GPU from NVIDIA's
#: data sheets: V100 SXM2 6, A100 SXM4 12, H100/H200 SXM5 18, B200 18), each row with its source, then DCGM's floors.
TABLE: dict[tuple[str, str], Reference] = {
    **{(row["GPU model"], row["metric"]): _reference(row) for row in table("reference_figures.tsv")},
    **{(model, metric): ref for model, rows in DCGM_ROWS.items() for metric, ref in rows.items()},
}


def lookup(
    model: str, metric: str, gpu: Gpu | None = None, overrides: Mapping[Any, float] | None = None
) -> Reference | None:
    """The reference for ``metric`` on ``model``: the node class's override, else the model's row, else (host
    copies) the PCIe rate of the GPU's link."""
    if overrides and metric in overrides:
        value = overrides[metric]
        return Reference(value, value, METRICS.get(metric, ""), "the node class's references")
    for (pattern, name), reference in TABLE.items():
        if name == metric and fnmatch.fnmatchcase(model, pattern):
            return reference
    if metric in HOST_COPY_METRICS:
        gen, width = (gpu.pcie_max_gen, gpu.pcie_max_width) if gpu is not None else (None, None)
        if gen not in _PCIE_RAW:
            return None
        raw = _PCIE_RAW[gen] * (width or 16) / 16
        return Reference(round(raw * 0.8, 1), round(raw * 0.7, 1), "GB/s", f"gen{gen} x{width or 16}: {PCIE_SOURCE}")
    return None


def rows() -> list[tuple[str, str, Reference]]:
    """Every row, PCIe rows included, for the documentation's table."""
    table = [(pattern, metric, ref) for (pattern, metric), ref in TABLE.items()]
    for gen, raw in _PCIE_RAW.items():
        table.append(
            (
                f"any other GPU on a gen{gen} x16 link",
                "h2d_bandwidth, d2h_bandwidth",
                Reference(round(raw * 0.8, 1), round(raw * 0.7, 1), "GB/s", PCIE_SOURCE),
            )
        )
    return table
