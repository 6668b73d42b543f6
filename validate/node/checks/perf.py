"""Performance: matrix products, memory and copy bandwidths, NCCL all-reduce, judged against references.

Each check is a row of :func:`measure`: the tools that can measure it, tried in order; one that is not installed
hands on to the next, and where none is, the check is skipped naming what to install."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gpuready.core.perf import MATES_FRACTION
from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi, perf, tool_output
from gpuready.validate.node.checks.commands import (
    DCGM_PERF_COMMAND,
    DCGM_PERF_PARAMETERS,
    DCGM_PERF_TESTS,
    DCGMI_COMMAND,
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
NO_PROBE = "nothing here measures it: " + INSTALL_PROBE
NO_PROBE_OR_DCGM = (
    "nothing here measures it: install DCGM (datacenter-gpu-manager-4, gpuready's dcgm role) or " + INSTALL_PROBE
)
NO_COPY_TOOL = (
    "nothing here measures it: build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or "
    + INSTALL_PROBE
)
# DCGM 3's pcie plugin copies between peers (test_p2p_on, outputP2PBandwidthMatrix in nvvs/plugin_src/pcie/
# PcieMain.cpp at NVIDIA/DCGM v3.3.9) but only files the figures as grouped stats (SetGroupedStat: the plugin's
# stats file), with no info message and no floor, so `dcgmi diag` prints none of them. DCGM 4 ships nvbandwidth
# with its CUDA 12 plugins from 4.0.0 and its CUDA 13 ones later (nvvs/plugin_src/nvbandwidth/Cuda12 and Cuda13,
# installed to libexec/datacenter-gpu-manager-4/plugins/cudaNN), not with its CUDA 11 ones; the first try runs it.
DCGM_PRINTS_NO_PEERS = (
    "DCGM is installed here without nvbandwidth, and nothing else here measures peer copies: DCGM 3 ships no "
    "nvbandwidth and its pcie plugin prints no peer-to-peer figure (it keeps its peer copies' figures in its stats "
    "file, judged against nothing); DCGM 4 ships nvbandwidth with its CUDA 12 and 13 plugins, which this check "
    "runs: install datacenter-gpu-manager-4-cuda12 or -cuda13 for the driver's CUDA major (gpuready's dcgm role, "
    "gpuready provision cluster, does), or " + INSTALL_PROBE
)
# NVIDIA packages NCCL (libnccl2, libnccl-dev in its CUDA repository: NCCL installation guide, "Ubuntu") but not
# nccl-tests, and DCGM measures no all-reduce by itself: its nccl_tests plugin (DCGM 4.5 on) runs the
# all_reduce_perf the node provides (DCGM_NCCL_TESTS_BIN_PATH, NVIDIA/DCGM nvvs/plugin_src/nccl_tests/
# NcclTestsPlugin.cpp). gpuready's nccl_tests role builds it (on by default for node classes with 2+ GPUs) and
# links /usr/local/bin/all_reduce_perf, which this check's `command -v` finds.
NO_NCCL_TOOL = (
    "nothing here runs NCCL, and NVIDIA packages no all_reduce_perf (DCGM's nccl_tests plugin runs one the node "
    "provides): gpuready's nccl_tests role builds nccl-tests against NVIDIA's NCCL and links "
    "/usr/local/bin/all_reduce_perf: `gpuready provision cluster --tags nccl_tests` (on by default for node classes "
    "with 2 or more GPUs; gpuready.nccl_tests.enabled must not be false); or " + INSTALL_PROBE
)


@dataclass
class _Measured:
    """What one tool said: figures (per GPU, or of pairs or the node), or a verdict without them (``fail``,
    ``skip``); none of these where the tool is not installed."""

    source: str = ""
    figures: list[perf.Figure] | None = None
    per_gpu: bool = True
    fail: str = ""
    skip: str = ""
    evidence: str = ""
    #: The references' metric these figures are judged against, where the tool measures differently from the
    #: check's own metric (DCGM's plugins: judged against DCGM's floors only).
    metric: str = ""
    #: A verdict the tool reached itself without printing a figure (DCGM's memory_bandwidth on a pass).
    passed: str = ""
    #: GPUs the tool itself failed against its own floor, whatever the figures' judgement (DCGM's status), and
    #: the tool's name for the message.
    tool_failed: list[int] = field(default_factory=list)
    tool: str = ""


def _failed(why: str, answer: Answer) -> _Measured:
    return _Measured(fail=why, evidence=answer.evidence(1500))


def _installed(node: Node, command: str) -> Answer | None:
    answer = node.run(command)
    return None if tool_absent(answer, "== not installed") else answer


def _probe(node: Node, read: Callable[[Node, dict[str, Any], Answer], _Measured]) -> _Measured:
    """What ``read`` takes from gpuready's probe; nothing where torch (with CUDA) is missing."""
    answer = node.run(PROBE_COMMAND)
    if tool_absent(answer, "== no torch"):
        return _Measured()
    try:
        data = tool_output.probe(answer.stdout)
    except nvsmi.ParseError as e:
        why = "stopped at its time limit" if answer.rc in (124, 137) else f"exit {answer.rc}"
        return _failed(f"gpuready's probe failed ({why}): {e}", answer)
    if data.get("no_cuda"):  # a CPU-only torch: as if there were none
        return _Measured()
    if data.get("error"):
        return _failed(f"gpuready's probe could not measure: {data['error']}", answer)
    return read(node, data, answer)


def _gpu_figures(node: Node, values: dict[int, list[float]]) -> list[perf.Figure]:
    gpus = {g.index: g for g in node.smi.gpus}
    return [
        perf.Figure(
            f"GPU {index} ({gpus[index].bus_id})", gpus[index].name, samples, gpus[index], perf.busy([gpus[index]])
        )
        for index, samples in sorted(values.items())
        if index in gpus  # a device nvidia-smi does not list is no GPU of this node's (gpu.count says so)
    ]


def _pair_figures(node: Node, values: dict[tuple[int, int], list[float]]) -> list[perf.Figure]:
    gpus = {g.index: g for g in node.smi.gpus}
    figures = []
    for (a, b), samples in sorted(values.items()):
        pair = [gpus[i] for i in (a, b) if i in gpus]
        model = pair[0].name if pair else ""
        figures.append(perf.Figure(f"GPU {a} -> GPU {b}", model, samples, None, perf.busy(pair)))
    return figures


def _per_gpu_from_probe(key: str, node: Node, data: dict[str, Any], answer: Answer) -> _Measured:
    values = {g["index"]: g[key] for g in data.get("gpus", []) if g.get(key)}
    if not values:
        return _failed(f"gpuready's probe printed no {key} figure", answer)
    return _Measured(
        f"gpuready's probe (torch {data.get('torch', '?')}, {data.get('dtype', '?')})", _gpu_figures(node, values)
    )


def _pairs_from_probe(node: Node, data: dict[str, Any], answer: Answer) -> _Measured:
    pairs = {tuple(p["pair"]): p["p2p_bandwidth"] for p in data.get("p2p", []) if p.get("p2p_bandwidth")}
    if not pairs:
        return _Measured(skip="no GPU pair allows peer-to-peer access (torch.cuda.can_device_access_peer)")
    return _Measured(f"gpuready's probe (torch {data.get('torch', '?')})", _pair_figures(node, pairs), per_gpu=False)


def _from_nvbandwidth(test: str, node: Node) -> _Measured:
    answer = _installed(node, NVBANDWIDTH_COMMAND)
    if answer is None:
        return _Measured()
    first = answer.stdout.split("\n", 1)[0]  # names the nvbandwidth that ran
    path = first.removeprefix("== nvbandwidth ").strip() if first.startswith("== nvbandwidth ") else "nvbandwidth"
    source = f"{path} -t {test}, {SAMPLES} runs"
    if test == tool_output.P2P_TEST:
        pairs = tool_output.nvbandwidth_per_pair(answer.stdout)
        # nvbandwidth waives the test where no pair has peer access (NVIDIA/nvbandwidth issue #13).
        skip = "nvbandwidth measured no peer-to-peer pair (no pair allows it)"
        if not pairs:
            return _Measured(skip=skip, evidence=answer.evidence(800))
        return _Measured(source, _pair_figures(node, pairs), per_gpu=False)
    values = tool_output.nvbandwidth_per_gpu(answer.stdout, test)
    if not values:
        return _failed(f"nvbandwidth printed no {test} figure (exit {answer.rc})", answer)
    return _Measured(source, _gpu_figures(node, values))


def _dcgm_without_nvbandwidth(node: Node) -> _Measured:
    """Where nvbandwidth and the probe measured no peers: DCGM, if installed, is one without nvbandwidth."""
    answer = node.run(DCGMI_COMMAND)
    if tool_absent(answer, "== no dcgmi"):
        return _Measured()
    return _Measured(skip=DCGM_PRINTS_NO_PEERS, evidence=answer.evidence(200))


def _all_reduce(node: Node, samples: list[float], source: str, answer: Answer) -> _Measured:
    if not samples or not any(samples):
        return _failed(f"no bus bandwidth figure in the output (exit {answer.rc})", answer)
    gpus = node.smi.gpus
    figure = perf.Figure(f"{len(gpus)} GPUs", gpus[0].name, samples, None, perf.busy(gpus))
    return _Measured(source, [figure], per_gpu=False)


def _from_nccl_tests(node: Node) -> _Measured:
    answer = _installed(node, NCCL_COMMAND)
    if answer is None:
        return _Measured()
    return _all_reduce(node, tool_output.nccl_busbw(answer.stdout), "nccl-tests all_reduce_perf", answer)


def _all_reduce_from_probe(node: Node, data: dict[str, Any], answer: Answer) -> _Measured:
    if data.get("nccl_error"):
        return _Measured(fail=f"NCCL all-reduce through torch failed: {data['nccl_error']}")
    source = f"gpuready's probe (torch {data.get('torch')})"
    return _all_reduce(node, data.get("nccl_allreduce_busbw") or [], source, answer)


#: What each DCGM figure kind is judged as (references.METRICS) and the factor from DCGM's unit to its unit.
_DCGM_KINDS = {
    "stress_gflops": ("dcgm_stress_tflops", 1e-3),
    "memory_bandwidth": ("dcgm_memory_bandwidth", 1.0),
    "h2d": ("dcgm_h2d_bandwidth", 1.0),
    "d2h": ("dcgm_d2h_bandwidth", 1.0),
}


def _from_dcgm(kind: str, node: Node) -> _Measured:
    """A figure DCGM's plugins measured (``dcgmi diag -r pcie,targeted_stress,memory_bandwidth -j``), judged
    against DCGM's own per-SKU floor and the GPU's mates; nothing where dcgmi is not installed."""
    answer = node.run(DCGM_PERF_COMMAND)
    if tool_absent(answer, "== no dcgmi") or "== measured by the probe" in answer.stdout:
        return _Measured()
    tests = tool_output.DCGM_TESTS[kind]
    if answer.rc in (124, 137):
        return _failed(f"dcgmi diag -r {DCGM_PERF_TESTS} ran past its time limit and was stopped", answer)
    try:
        figures = tool_output.dcgm_figures(answer.stdout).get(kind, {})
        statuses = tool_output.dcgm_status(answer.stdout, *tests)
    except nvsmi.ParseError as e:
        return _failed(f"dcgmi diag did not answer in JSON (exit {answer.rc}): {e}", answer)
    ran = {
        gpu: (test, status.lower()) for gpu, (test, status) in statuses.items() if not status.lower().startswith("skip")
    }
    plugin = next((test for test, _ in ran.values()), tests[0])
    metric, scale = _DCGM_KINDS[kind]
    source = f"DCGM's {plugin} plugin (dcgmi diag -r {DCGM_PERF_TESTS} -p '{DCGM_PERF_PARAMETERS}' -j -v)"
    failing = [gpu for gpu, (_, status) in sorted(ran.items()) if status.startswith("fail")]
    if figures:
        values = {gpu: [round(v * scale, 4) for v in samples] for gpu, samples in figures.items()}
        silent = sorted(set(ran) - set(values))
        if failed := [gpu for gpu in silent if gpu in failing]:
            names = ", ".join(f"GPU {gpu}" for gpu in failed)
            return _failed(f"DCGM's {plugin} failed on {names} and printed no figure of it", answer)
        if silent:
            # DCGM 4 keeps a bounded number of info messages per test (16 before DCGM 4.6, 128 since:
            # DCGM_DIAG_TEST_RUN_INFO_INDICES_MAX(_V2), dcgmlib/dcgm_structs.h; NVIDIA/DCGM issue #215).
            source += "; no figure printed for " + ", ".join(f"GPU {gpu}" for gpu in silent)
            source += " (DCGM keeps a bounded number of info messages per test), which DCGM itself passed"
        own = [gpu for gpu in failing if gpu in values]
        figures_ = _gpu_figures(node, values)
        return _Measured(source, figures_, metric=metric, evidence=answer.evidence(800), tool_failed=own, tool=plugin)
    if ran and all(status.startswith(("pass", "warn")) for _, status in ran.values()):
        # memory_bandwidth names its figure only where a GPU falls short (DCGM_FR_MEMORY_BANDWIDTH_MSG). DCGM's
        # Warn is "this test passed with warnings" (DCGM_DIAG_RESULT_WARN, dcgmlib/dcgm_structs.h).
        warned = sum(status.startswith("warn") for _, status in ran.values())
        return _Measured(
            source,
            passed=f"DCGM's {plugin} passed on {len(ran)} GPU(s)"
            + (f" ({warned} with a warning)" if warned else "")
            + ": each at least DCGM's floor for its SKU (nvvs/diag-skus.yaml.in); DCGM prints no figure of a pass",
            evidence=answer.evidence(800),
        )
    if failing:
        names = ", ".join(f"GPU {gpu}" for gpu in failing)
        return _failed(f"DCGM's {plugin} failed on {names} and printed no figure", answer)
    return _Measured(
        skip=f"DCGM's {plugin} did not run here (skipped for this GPU or not in this DCGM)",
        evidence=answer.evidence(800),
    )


def measure(
    id: str,
    what: str,
    remedy: str,
    tries: list[Callable[[Node], _Measured]],
    missing: str,
    *,
    metric: str = "",
    alone: str = "",
) -> None:
    """Register a check judged by the first of ``tries`` that measured, against the references of ``metric`` (the
    id's own name by default) or the node class's own lower bounds where it has them; ``missing`` is the skip
    reason where no tool is installed, ``alone`` where the node has one GPU."""

    def judge(node: Node, v: Verdict) -> Check:
        if alone and len(node.smi.gpus) < 2:
            return v.skipped(alone)
        for attempt in tries:
            measured = attempt(node)
            if measured.fail:
                return v.failed(measured.fail, measured.evidence)
            if measured.skip:
                return v.skipped(measured.skip, measured.evidence)
            if measured.passed:
                return v.passed(measured.passed, f"measured by {measured.source}\n{measured.evidence}")
            if measured.figures is not None:
                overrides: dict[str, float] = dict(node.node_class.references.items())
                name = measured.metric or metric or id.split(".", 1)[1]
                figures, source = measured.figures, measured.source
                result = perf.judge(id, v.host, name, figures, source, overrides=overrides, per_gpu=measured.per_gpu)
                # The tool's own floor (DCGM's SKU file) may have no row here: its failure stands.
                own = [g for g in measured.tool_failed if not any(f.startswith(f"GPU {g} (") for f in result.failing)]
                if own:
                    names = ", ".join(f"GPU {g}" for g in own)
                    said = f"DCGM's {measured.tool} failed {names} against DCGM's own floor for the SKU"
                    result.message = said if result.status == "passed" else f"{result.message}; {said}"
                    result.status = "failed"
                return result
        return v.skipped(missing)

    check(id, what, remedy, depends=GPU_VIEW)(judge)


measure(
    "perf.matmul_tflops",
    "dense matrix-product TFLOP/s per GPU at least the model's lower bound and "
    f"{MATES_FRACTION:.0%} of its mates' median "
    "(gpuready's probe through torch in bf16, fp16 on Volta; else DCGM's targeted_stress GEMM against DCGM's floor)",
    PERF_REMEDY,
    [partial(_probe, read=partial(_per_gpu_from_probe, "matmul_tflops")), partial(_from_dcgm, "stress_gflops")],
    NO_PROBE_OR_DCGM,
)
measure(
    "perf.memory_bandwidth",
    "device memory bandwidth per GPU at least the model's lower bound and "
    f"{MATES_FRACTION:.0%} of its mates' median "
    "(gpuready's probe through torch, a device copy; else DCGM's memory_bandwidth, a STREAM Triad, against "
    "DCGM's floor)",
    PERF_REMEDY,
    [partial(_probe, read=partial(_per_gpu_from_probe, "memory_bandwidth")), partial(_from_dcgm, "memory_bandwidth")],
    NO_PROBE_OR_DCGM,
)
for _id, _direction, _test in (
    ("perf.h2d_bandwidth", "host-to-device", tool_output.H2D_TEST),
    ("perf.d2h_bandwidth", "device-to-host", tool_output.D2H_TEST),
):
    measure(
        _id,
        f"pinned {_direction} copy bandwidth per GPU (nvbandwidth, else gpuready's probe, else DCGM's pcie plugin) "
        f"at least the model's lower bound (else the PCIe link's) and {MATES_FRACTION:.0%} of its mates' median",
        "A slow copy with a full-width link points at the host (NUMA placement, IOMMU); check gpu.pcie_link.",
        [
            partial(_from_nvbandwidth, _test),
            partial(_probe, read=partial(_per_gpu_from_probe, _id.split(".")[1])),
            partial(_from_dcgm, _id.split(".")[1][:3]),
        ],
        NO_COPY_TOOL,
    )
measure(
    "perf.p2p_bandwidth",
    "peer-to-peer copy bandwidth per GPU pair that allows it (nvbandwidth device_to_device_memcpy_read_ce, else "
    "gpuready's probe) at least the model's lower bound",
    "Check NVLink (topology.nvlink, topology.nvlink_errors) and the NVSwitch fabric (node.fabric_manager); "
    "a PCIe pair below its mates points at the PCIe switch or ACS settings.",
    [
        partial(_from_nvbandwidth, tool_output.P2P_TEST),
        partial(_probe, read=_pairs_from_probe),
        _dcgm_without_nvbandwidth,
    ],
    NO_COPY_TOOL,
    alone="one GPU: no peer-to-peer pair",
)
measure(
    "perf.nccl_allreduce",
    "NCCL all-reduce bus bandwidth within the node (nccl-tests all_reduce_perf, else gpuready's probe through "
    "torch's NCCL) at least the model's lower bound",
    "Check NVLink/NVSwitch health (topology.nvlink, node.fabric_manager) and "
    "that no other job runs; the evidence names the reference and where it was measured.",
    [_from_nccl_tests, partial(_probe, read=_all_reduce_from_probe)],
    NO_NCCL_TOOL,
    metric="nccl_allreduce_busbw",
    # all_reduce_perf on one GPU reports a bus bandwidth of 0: there is no link within the node to measure.
    alone="one GPU: no all-reduce within the node",
)
