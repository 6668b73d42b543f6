"""Performance: matrix products, memory and copy bandwidths, NCCL all-reduce, judged against references."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi, perf, tool_output
from gpuready.validate.node.checks.commands import (
    NCCL_COMMAND,
    NVBANDWIDTH_COMMAND,
    PROBE_COMMAND,
    SAMPLES,
    tool_absent,
)
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Answer, Node

PERF_REMEDY = (
    "A GPU below its mates or its model's reference: look at the evidence's samples, then at gpu.throttle, "
    "gpu.pcie_link and what else runs on the node; rerun, and drain the node if the figure stays low."
)
INSTALL_PROBE = "pip install torch built for CUDA (gpuready's probe measures through it)"


@dataclass
class _Measured:
    """What one tool said about one metric: figures, or why there are none (skip or fail)."""

    source: str = ""
    figures: list[perf.Figure] | None = None
    skip: str = ""
    fail: str = ""
    evidence: str = ""


def _probe(node: Node) -> tuple[dict[str, Any] | None, str, Answer]:
    """The probe's result; else (None, why) where the probe failed, (None, "") where torch (with CUDA) is missing."""
    answer = node.run(PROBE_COMMAND)
    if tool_absent(answer, "== no torch"):
        return None, "", answer
    try:
        data = tool_output.probe(answer.stdout)
    except nvsmi.ParseError as e:
        why = "stopped at its time limit" if answer.rc in (124, 137) else f"exit {answer.rc}"
        return None, f"gpuready's probe failed ({why}): {e}", answer
    if data.get("no_cuda"):  # a CPU-only torch: as if there were none
        return None, "", answer
    if data.get("error"):
        return None, f"gpuready's probe could not measure: {data['error']}", answer
    return data, "", answer


def _gpu_figures(node: Node, values: dict[int, list[float]]) -> list[perf.Figure]:
    gpus = {g.index: g for g in node.smi.gpus}
    return [
        perf.Figure(
            f"GPU {index} ({gpus[index].bus_id})", gpus[index].name, samples, gpus[index], perf.busy([gpus[index]])
        )
        for index, samples in sorted(values.items())
        if index in gpus  # a device nvidia-smi does not list is no GPU of this node's (gpu.count says so)
    ]


def _from_probe(node: Node, key: str) -> _Measured:
    data, why, answer = _probe(node)
    if data is None:
        return _Measured(fail=why, evidence=answer.evidence(1500)) if why else _Measured(skip="no torch")
    values = {g["index"]: g[key] for g in data.get("gpus", []) if g.get(key)}
    source = f"gpuready's probe (torch {data.get('torch', '?')}, {data.get('dtype', '?')})"
    if not values:
        return _Measured(fail=f"gpuready's probe printed no {key} figure", evidence=answer.evidence(1500))
    return _Measured(source, _gpu_figures(node, values))


def _from_nvbandwidth(node: Node, test: str) -> _Measured:
    answer = node.run(NVBANDWIDTH_COMMAND)
    if tool_absent(answer, "== not installed"):
        return _Measured(skip="nvbandwidth")
    values = tool_output.nvbandwidth_per_gpu(answer.stdout, test)
    if not values:
        return _Measured(
            fail=f"nvbandwidth printed no {test} figure (exit {answer.rc})", evidence=answer.evidence(1500)
        )
    return _Measured(f"{_nvbandwidth_path(answer)} -t {test}, {SAMPLES} runs", _gpu_figures(node, values))


def _nvbandwidth_path(answer: Answer) -> str:
    """Which nvbandwidth ran (the command's first line names it)."""
    first = answer.stdout.split("\n", 1)[0]
    return first.removeprefix("== nvbandwidth ").strip() if first.startswith("== nvbandwidth ") else "nvbandwidth"


def _verdict(node: Node, v: Verdict, metric: str, tries: list[Callable[[], _Measured]], install: str) -> Check:
    """The first tool that measured decides; one that is missing hands on to the next; none: skipped."""
    for attempt in tries:
        measured = attempt()
        if measured.fail:
            return v.failed(measured.fail, measured.evidence)
        if measured.figures is not None:
            return _judge(node, v, metric, measured.figures, measured.source)
    return v.skipped(f"nothing here measures it: {install}")


def _judge(
    node: Node, v: Verdict, metric: str, figures: list[perf.Figure], source: str, *, per_gpu: bool = True
) -> Check:
    """The figures against the model's references, or the node class's own lower bounds where it has them."""
    overrides: dict[str, float] = dict(node.node_class.references.items())
    return perf.judge(v.id, v.host, metric, figures, source, overrides=overrides, per_gpu=per_gpu)


@check(
    "perf.matmul_tflops",
    "dense matrix-product TFLOP/s per GPU in its fastest dense type (bf16, fp16 on Volta) at least the model's "
    "lower bound and 80% of its mates' median (gpuready's probe through torch)",
    PERF_REMEDY,
    depends=GPU_VIEW,
)
def matmul_tflops(node: Node, v: Verdict) -> Check:
    return _verdict(node, v, "matmul_tflops", [lambda: _from_probe(node, "matmul_tflops")], INSTALL_PROBE)


@check(
    "perf.memory_bandwidth",
    "device memory bandwidth per GPU (a device-to-device copy) at least the model's lower bound and 80% of its "
    "mates' median (gpuready's probe through torch)",
    PERF_REMEDY,
    depends=GPU_VIEW,
)
def memory_bandwidth(node: Node, v: Verdict) -> Check:
    return _verdict(node, v, "memory_bandwidth", [lambda: _from_probe(node, "memory_bandwidth")], INSTALL_PROBE)


@check(
    "perf.h2d_bandwidth",
    "pinned host-to-device copy bandwidth per GPU (nvbandwidth, else gpuready's probe) at least the model's "
    "lower bound (else the PCIe link's) and 80% of its mates' median",
    "A slow copy with a full-width link points at the host (NUMA placement, IOMMU); check gpu.pcie_link.",
    depends=GPU_VIEW,
)
def h2d_bandwidth(node: Node, v: Verdict) -> Check:
    return _verdict(
        node,
        v,
        "h2d_bandwidth",
        [lambda: _from_nvbandwidth(node, tool_output.H2D_TEST), lambda: _from_probe(node, "h2d_bandwidth")],
        "build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or " + INSTALL_PROBE,
    )


@check(
    "perf.d2h_bandwidth",
    "pinned device-to-host copy bandwidth per GPU (nvbandwidth, else gpuready's probe) at least the model's "
    "lower bound (else the PCIe link's) and 80% of its mates' median",
    "A slow copy with a full-width link points at the host (NUMA placement, IOMMU); check gpu.pcie_link.",
    depends=GPU_VIEW,
)
def d2h_bandwidth(node: Node, v: Verdict) -> Check:
    return _verdict(
        node,
        v,
        "d2h_bandwidth",
        [lambda: _from_nvbandwidth(node, tool_output.D2H_TEST), lambda: _from_probe(node, "d2h_bandwidth")],
        "build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or " + INSTALL_PROBE,
    )


def _pair_figures(node: Node, values: dict[tuple[int, int], list[float]]) -> list[perf.Figure]:
    gpus = {g.index: g for g in node.smi.gpus}
    figures = []
    for (a, b), samples in sorted(values.items()):
        pair = [gpus[i] for i in (a, b) if i in gpus]
        model = pair[0].name if pair else ""
        figures.append(perf.Figure(f"GPU {a} -> GPU {b}", model, samples, None, perf.busy(pair)))
    return figures


@check(
    "perf.p2p_bandwidth",
    "peer-to-peer copy bandwidth per GPU pair that allows it (nvbandwidth device_to_device_memcpy_read_ce, else "
    "gpuready's probe) at least the model's lower bound",
    "Check NVLink (topology.nvlink, topology.nvlink_errors) and the NVSwitch fabric (node.fabric_manager); "
    "a PCIe pair below its mates points at the PCIe switch or ACS settings.",
    depends=GPU_VIEW,
)
def p2p_bandwidth(node: Node, v: Verdict) -> Check:
    if len(node.smi.gpus) < 2:
        return v.skipped("one GPU: no peer-to-peer pair")
    answer = node.run(NVBANDWIDTH_COMMAND)
    if not tool_absent(answer, "== not installed"):
        pairs = tool_output.nvbandwidth_per_pair(answer.stdout)
        if not pairs:
            # nvbandwidth waives the test where no pair has peer access (NVIDIA/nvbandwidth issue #13).
            return v.skipped("nvbandwidth measured no peer-to-peer pair (no pair allows it)", answer.evidence(800))
        return _judge(
            node,
            v,
            "p2p_bandwidth",
            _pair_figures(node, pairs),
            f"{_nvbandwidth_path(answer)} -t {tool_output.P2P_TEST}, {SAMPLES} runs",
            per_gpu=False,
        )
    data, why, probe_answer = _probe(node)
    if why:
        return v.failed(why, probe_answer.evidence(1500))
    if data is None:
        return v.skipped(
            "nothing here measures it: build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or "
            + INSTALL_PROBE
        )
    pairs = {tuple(p["pair"]): p["p2p_bandwidth"] for p in data.get("p2p", []) if p.get("p2p_bandwidth")}
    if not pairs:
        return v.skipped("no GPU pair allows peer-to-peer access (torch.cuda.can_device_access_peer)")
    return _judge(
        node,
        v,
        "p2p_bandwidth",
        _pair_figures(node, pairs),
        f"gpuready's probe (torch {data.get('torch', '?')})",
        per_gpu=False,
    )


@check(
    "perf.nccl_allreduce",
    "NCCL all-reduce bus bandwidth within the node (nccl-tests all_reduce_perf, else gpuready's probe through "
    "torch's NCCL) at least the model's lower bound",
    "Check NVLink/NVSwitch health (topology.nvlink, node.fabric_manager) and "
    "that no other job runs; compare with the reference table in docs/node-checks.md.",
    depends=GPU_VIEW,
)
def nccl_allreduce(node: Node, v: Verdict) -> Check:
    gpus = node.smi.gpus
    if len(gpus) < 2:
        # all_reduce_perf on one GPU reports a bus bandwidth of 0: there is no link within the node to measure.
        return v.skipped("one GPU: no all-reduce within the node")
    answer = node.run(NCCL_COMMAND)
    if not tool_absent(answer, "== not installed"):
        samples, source, evidence = tool_output.nccl_busbw(answer.stdout), "nccl-tests all_reduce_perf", answer
    else:
        data, why, evidence = _probe(node)
        if why:
            return v.failed(why, evidence.evidence(1500))
        if data is None:
            return v.skipped(
                "nothing here runs NCCL: build all_reduce_perf (github.com/NVIDIA/nccl-tests) and put it on PATH, "
                "or " + INSTALL_PROBE
            )
        if data.get("nccl_error"):
            return v.failed(f"NCCL all-reduce through torch failed: {data['nccl_error']}")
        samples, source = data.get("nccl_allreduce_busbw") or [], f"gpuready's probe (torch {data.get('torch')})"
    if not samples or not any(samples):
        return v.failed(f"no bus bandwidth figure in the output (exit {evidence.rc})", evidence.evidence(1500))
    figure = perf.Figure(f"{len(gpus)} GPUs", gpus[0].name, samples, None, perf.busy(gpus))
    return _judge(node, v, "nccl_allreduce_busbw", [figure], source, per_gpu=False)
