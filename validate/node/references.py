"""Reference figures per GPU model, kept in one table (as ReFrame keeps its references).

A row is (model pattern, metric) -> target, lower bound, unit, source. A metric with no row for
the node's model is recorded, not judged. Patterns are matched against nvidia-smi's product name,
first match wins, so specific rows come before general ones.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuready.validate.node.nvsmi import Gpu


@dataclass(frozen=True)
class Reference:
    target: float
    lower: float
    unit: str
    source: str

    def describe(self) -> str:
        return f"target {self.target:g} {self.unit}, lower bound {self.lower:g} {self.unit} ({self.source})"


# PCI-SIG raw rates for x16 per direction: gen3 8 GT/s -> 15.75 GB/s, gen4 16 GT/s -> 31.5 GB/s,
# gen5 32 GT/s -> 63 GB/s (128b/130b encoding). A host-to-device copy reaches about 80% of it after
# packet overhead; the lower bound, 70%, is gpuready's choice, not a vendor figure.
_PCIE_RAW = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
PCIE_SOURCE = "PCI-SIG raw x16 rate; target 80%, lower bound 70% (gpuready)"

#: (model pattern, metric) -> Reference. NVLink links per GPU: NVIDIA's data sheets (V100 SXM2: 6,
#: A100 SXM4: 12, H100/H200 SXM5: 18, B200: 18).
TABLE: dict[tuple[str, str], Reference] = {
    ("Tesla V100-SXM2*", "nvlink_links"): Reference(6, 6, "links", "NVIDIA Tesla V100 data sheet"),
    ("NVIDIA A100-SXM4*", "nvlink_links"): Reference(12, 12, "links", "NVIDIA A100 data sheet"),
    ("NVIDIA H100 80GB HBM3", "nvlink_links"): Reference(18, 18, "links", "NVIDIA H100 data sheet (SXM5)"),
    ("NVIDIA H200*", "nvlink_links"): Reference(18, 18, "links", "NVIDIA H200 data sheet (SXM)"),
    ("NVIDIA B200*", "nvlink_links"): Reference(18, 18, "links", "NVIDIA DGX B200 user guide"),
}


def lookup(model: str, metric: str, gpu: Gpu | None = None) -> Reference | None:
    """The reference for ``metric`` on ``model``; the host-to-device bandwidth follows the GPU's PCIe link."""
    if metric == "h2d_bandwidth":
        gen, width = (gpu.pcie_max_gen, gpu.pcie_max_width) if gpu is not None else (None, None)
        if gen not in _PCIE_RAW:
            return None
        raw = _PCIE_RAW[gen] * (width or 16) / 16
        return Reference(round(raw * 0.8, 1), round(raw * 0.7, 1), "GB/s", f"gen{gen} x{width or 16}: {PCIE_SOURCE}")
    for (pattern, name), reference in TABLE.items():
        if name == metric and fnmatch.fnmatchcase(model, pattern):
            return reference
    return None


def rows() -> list[tuple[str, str, Reference]]:
    """Every row, PCIe rows included, for the documentation's table."""
    table = [(pattern, metric, ref) for (pattern, metric), ref in TABLE.items()]
    for gen, raw in _PCIE_RAW.items():
        table.append(
            (
                f"any GPU on a gen{gen} x16 link",
                "h2d_bandwidth",
                Reference(round(raw * 0.8, 1), round(raw * 0.7, 1), "GB/s", PCIE_SOURCE),
            )
        )
    return table
