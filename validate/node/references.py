"""Reference figures per GPU model, kept in one table (as ReFrame keeps its references).

A row is (model pattern, metric) -> target, lower bound, unit, source. Patterns are matched against
nvidia-smi's product name, first match wins, so specific rows come before general ones. A node class
overrides a lower bound with ``references: {metric: value}``. A metric with no row for the node's model
is judged against the GPU's same-model mates only; with no mates either it is recorded and says so.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuready.core.perf import Reference

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
}

# PCI-SIG raw rates for x16 per direction: gen3 8 GT/s -> 15.75 GB/s, gen4 16 GT/s -> 31.5 GB/s,
# gen5 32 GT/s -> 63 GB/s (128b/130b encoding). A host-to-device copy reaches about 80% of it after
# packet overhead; the lower bound, 70%, is gpuready's choice, not a vendor figure.
_PCIE_RAW = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
PCIE_SOURCE = "PCI-SIG raw x16 rate; target 80%, lower bound 70% (gpuready)"

#: The share of a data-sheet peak below which a GPU fails: gpuready's choice, low enough that a healthy
#: GPU measured by a plain kernel passes (a CUDA vector add reached 2,761 of the H100 SXM's 3,350 GB/s:
#: 82%), high enough that a GPU at half speed fails; the median-of-mates rule catches what is between.
PEAK_FLOOR = 0.6

#: Azure's HPC health checks (Azure/azurehpc-health-checks, MIT licence, commit 0e0a1ac2): the conf file
#: of each VM size and its line. check_gpu_bw <H2D and D2H GB/s> <GPU-to-GPU GB/s> runs nvbandwidth
#: (customTests/azure_gpu_bandwidth.nhc) and fails any GPU or pair below; check_nccl_allreduce <GB/s>
#: runs all_reduce_perf within the VM (customTests/azure_nccl_allreduce.nhc).
_AZURE = "Azure/azurehpc-health-checks conf/"


def _peak(value: float, unit: str, source: str) -> Reference:
    return Reference(value, round(value * PEAK_FLOOR, 1), unit, f"{source}; lower bound {PEAK_FLOOR:.0%} (gpuready)")


def _azure(lower: float, where: str) -> Reference:
    return Reference(lower, lower, "GB/s", _AZURE + where)


_H100_SXM = "NVIDIA H100 Tensor Core GPU data sheet (SXM5)"
_H100_PCIE = "NVIDIA H100 Tensor Core GPU data sheet (PCIe)"
_H200 = "NVIDIA H200 Tensor Core GPU data sheet (SXM)"
_A100 = "NVIDIA A100 Tensor Core GPU data sheet"
_V100 = "NVIDIA Tesla V100 GPU data sheet"
_L40S = "NVIDIA L40S GPU data sheet"

#: (model pattern, metric) -> Reference. Dense (not sparse) Tensor Core TFLOP/s in BF16 (FP16 on Volta,
#: which has no BF16) and peak memory bandwidth from NVIDIA's data sheets; NVLink links per GPU from the
#: same sheets (V100 SXM2: 6, A100 SXM4: 12, H100/H200 SXM5: 18, B200: 18).
TABLE: dict[tuple[str, str], Reference] = {
    # H100 SXM5 (HGX): ND96isr H100 v5 on Azure.
    ("NVIDIA H100 80GB HBM3", "matmul_tflops"): _peak(989.4, "TFLOP/s", _H100_SXM + ": BF16 989.4"),
    ("NVIDIA H100 80GB HBM3", "memory_bandwidth"): _peak(3350, "GB/s", _H100_SXM + ": 3.35 TB/s"),
    ("NVIDIA H100 80GB HBM3", "h2d_bandwidth"): _azure(48, "nd96isr_h100_v5.conf line 49 (check_gpu_bw 48 335)"),
    ("NVIDIA H100 80GB HBM3", "d2h_bandwidth"): _azure(48, "nd96isr_h100_v5.conf line 49 (check_gpu_bw 48 335)"),
    ("NVIDIA H100 80GB HBM3", "p2p_bandwidth"): _azure(335, "nd96isr_h100_v5.conf line 49 (check_gpu_bw 48 335)"),
    ("NVIDIA H100 80GB HBM3", "nccl_allreduce_busbw"): _azure(
        460, "nd96isr_h100_v5.conf line 52 (check_nccl_allreduce 460.0 1 16G)"
    ),
    ("NVIDIA H100 80GB HBM3", "nvlink_links"): Reference(18, 18, "links", _H100_SXM),
    ("NVIDIA H100 PCIe", "matmul_tflops"): _peak(756, "TFLOP/s", _H100_PCIE + ": BF16 756"),
    ("NVIDIA H100 PCIe", "memory_bandwidth"): _peak(2000, "GB/s", _H100_PCIE + ": 2 TB/s"),
    # H200 SXM: ND96isr H200 v5.
    ("NVIDIA H200", "matmul_tflops"): _peak(989.4, "TFLOP/s", _H200 + ": BF16 989"),
    ("NVIDIA H200", "memory_bandwidth"): _peak(4800, "GB/s", _H200 + ": 4.8 TB/s"),
    ("NVIDIA H200", "h2d_bandwidth"): _azure(48, "nd96isr_h200_v5.conf line 50 (check_gpu_bw 48 335)"),
    ("NVIDIA H200", "d2h_bandwidth"): _azure(48, "nd96isr_h200_v5.conf line 50 (check_gpu_bw 48 335)"),
    ("NVIDIA H200", "p2p_bandwidth"): _azure(335, "nd96isr_h200_v5.conf line 50 (check_gpu_bw 48 335)"),
    ("NVIDIA H200", "nccl_allreduce_busbw"): _azure(
        431, "nd96isr_h200_v5.conf line 53 (check_nccl_allreduce 431.0 1 16G)"
    ),
    ("NVIDIA H200*", "nvlink_links"): Reference(18, 18, "links", _H200),
    # A100 SXM4 80GB: ND96amsr A100 v4; 40GB: ND96asr v4.
    ("NVIDIA A100-SXM4-80GB", "memory_bandwidth"): _peak(2039, "GB/s", _A100 + ": 80GB SXM 2,039 GB/s"),
    ("NVIDIA A100-SXM4-80GB", "h2d_bandwidth"): _azure(21, "nd96amsr_a100_v4.conf line 54 (check_gpu_bw 21 238)"),
    ("NVIDIA A100-SXM4-80GB", "d2h_bandwidth"): _azure(21, "nd96amsr_a100_v4.conf line 54 (check_gpu_bw 21 238)"),
    ("NVIDIA A100-SXM4-80GB", "p2p_bandwidth"): _azure(238, "nd96amsr_a100_v4.conf line 54 (check_gpu_bw 21 238)"),
    ("NVIDIA A100-SXM4-80GB", "nccl_allreduce_busbw"): _azure(
        228, "nd96amsr_a100_v4.conf line 57 (check_nccl_allreduce 228.0 1 16G)"
    ),
    ("NVIDIA A100-SXM4-40GB", "memory_bandwidth"): _peak(1555, "GB/s", _A100 + ": 40GB 1,555 GB/s"),
    ("NVIDIA A100-SXM4-40GB", "h2d_bandwidth"): _azure(21, "nd96asr_v4.conf line 54 (check_gpu_bw 21 235)"),
    ("NVIDIA A100-SXM4-40GB", "d2h_bandwidth"): _azure(21, "nd96asr_v4.conf line 54 (check_gpu_bw 21 235)"),
    ("NVIDIA A100-SXM4-40GB", "p2p_bandwidth"): _azure(235, "nd96asr_v4.conf line 54 (check_gpu_bw 21 235)"),
    ("NVIDIA A100-SXM4-40GB", "nccl_allreduce_busbw"): _azure(
        228, "nd96asr_v4.conf line 57 (check_nccl_allreduce 228.0 1 8G)"
    ),
    ("NVIDIA A100-PCIE-40GB", "memory_bandwidth"): _peak(1555, "GB/s", _A100 + ": 40GB PCIe 1,555 GB/s"),
    ("NVIDIA A100 80GB PCIe", "memory_bandwidth"): _peak(1935, "GB/s", _A100 + ": 80GB PCIe 1,935 GB/s"),
    ("NVIDIA A100*", "matmul_tflops"): _peak(312, "TFLOP/s", _A100 + ": BF16 312"),
    ("NVIDIA A100-SXM4*", "nvlink_links"): Reference(12, 12, "links", _A100),
    # V100 SXM2: ND40rs v2 (no GPU-to-GPU figure there).
    ("Tesla V100-SXM2*", "matmul_tflops"): _peak(125, "TFLOP/s", _V100 + ": SXM2 FP16 Tensor 125"),
    ("Tesla V100-SXM2*", "memory_bandwidth"): _peak(900, "GB/s", _V100 + ": 900 GB/s"),
    ("Tesla V100-SXM2*", "h2d_bandwidth"): _azure(9, "nd40rs_v2.conf line 40 (check_gpu_bw 9)"),
    ("Tesla V100-SXM2*", "d2h_bandwidth"): _azure(9, "nd40rs_v2.conf line 40 (check_gpu_bw 9)"),
    ("Tesla V100-SXM2*", "nccl_allreduce_busbw"): _azure(
        110, "nd40rs_v2.conf line 42 (check_nccl_allreduce 110.0 1 8G)"
    ),
    ("Tesla V100-SXM2*", "nvlink_links"): Reference(6, 6, "links", _V100),
    ("Tesla V100-PCIE*", "matmul_tflops"): _peak(112, "TFLOP/s", _V100 + ": PCIe FP16 Tensor 112"),
    ("Tesla V100-PCIE*", "memory_bandwidth"): _peak(900, "GB/s", _V100 + ": 900 GB/s"),
    ("NVIDIA L40S", "matmul_tflops"): _peak(362, "TFLOP/s", _L40S + ": BF16 362.05"),
    ("NVIDIA L40S", "memory_bandwidth"): _peak(864, "GB/s", _L40S + ": 864 GB/s"),
    ("NVIDIA B200*", "nvlink_links"): Reference(18, 18, "links", "NVIDIA DGX B200 user guide"),
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
    if metric in ("h2d_bandwidth", "d2h_bandwidth"):
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
