"""The performance checks judge real tool outputs: references, the median of mates, busy GPUs, missing
tools, bad or partial output. Recordings: tests/fixtures/gpu/SOURCES.md; edits are one named field each."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpuready.core.results import Check
from gpuready.lab import replay
from gpuready.validate.node import checks, gpu_probe, perf, references, tool_output
from gpuready.validate.node.node import Answer
from gpuready.validate.node.nvsmi import parse_xml
from tests.unit.node.test_captures import FIXTURES, capture, node_for

NVBW_4090 = (FIXTURES / "nvbandwidth" / "rtx-4090-x8-nvbandwidth-v0.2-issue-15.txt").read_text()
NVBW_A6000_P2P = (FIXTURES / "nvbandwidth" / "rtx-a6000-x6-d2d-read-ce-v0.8-issue-50.txt").read_text()
NCCL_2GPU = (FIXTURES / "nccl-tests" / "2-gpu-table-tail-nccl-issue-340.txt").read_text()
#: Eight GPUs of one model, as the lab's h100-x8 host reports them.
H100_X8 = replay.smi_xml(replay.PROFILES["h100-x8"])
#: The RTX 4090 recording's figures are below an H100's references: these nodes judge by their mates only.
LOW = {"h2d_bandwidth": 1.0, "d2h_bandwidth": 1.0, "p2p_bandwidth": 1.0}


def one(node: object, id: str) -> Check:
    return checks.run_check(next(c for c in checks.CATALOGUE if c.id == id), node)  # type: ignore[arg-type]


def edit_column(text: str, test: str, gpu: int, value: str) -> str:
    """One named field edit of an nvbandwidth recording: GPU ``gpu``'s figure of ``test`` (the CPU's row)."""
    head, found, tail = text.partition(f"Running {test}.")
    assert found
    lines = tail.split("\n")
    row = next(n for n, line in enumerate(lines) if line.split()[:1] == ["0"] and "." in line)
    cells = lines[row].split()
    cells[gpu + 1] = value
    lines[row] = "0     " + "     ".join(cells[1:])
    return head + found + "\n".join(lines)


def test_real_nvbandwidth_on_eight_gpus_passes_by_its_mates() -> None:
    node = node_for(H100_X8, answers={checks.NVBANDWIDTH_COMMAND: NVBW_4090}, references=LOW)
    result = one(node, "perf.h2d_bandwidth")
    assert result.status == "passed", result.message
    assert result.message.startswith("8 figure(s), lowest 23.9 GB/s (GPU 2 (00000000:3A:00.0))")
    assert "GPU 5 (00000000:AB:00.0): median 26.38 GB/s of 1 sample(s), spread 0" in result.evidence
    assert one(node, "perf.d2h_bandwidth").status == "passed"


def test_one_gpu_at_half_its_mates_fails_alone_by_name_with_both_figures() -> None:
    slow = edit_column(NVBW_4090, "host_to_device_memcpy_ce", 5, "13.19")  # 26.38 halved
    result = one(node_for(H100_X8, answers={checks.NVBANDWIDTH_COMMAND: slow}, references=LOW), "perf.h2d_bandwidth")
    assert result.status == "failed"
    assert result.message == (
        "GPU 5 (00000000:AB:00.0): 13.19 GB/s below 85% of its 7 mate(s)' median 26.09 GB/s on this node"
    )
    assert result.remedy


def test_real_slow_gpu_beside_its_mates_that_dcgm_passed() -> None:
    # NVIDIA/DCGM issue #122: DCGM's ubergemm on a DGX A100-40GB, GPU 0 at 6.7 TF FP32 beside mates at 19.2,
    # after dcgmi diag --run xlong had passed. No reference row is for FP32; the mates alone catch it.
    text = (FIXTURES / "dcgm" / "ubergemm-a100-40gb-x8-dcgm-issue-122.txt").read_text()
    gflops = {int(a): float(g) for a, g in re.findall(r"ADAPTER#(\d+)\)\s+Ending with ([\d.]+) GFlops", text)}
    gpus = parse_xml(replay.smi_xml(replay.PROFILES["h100-x8"])).gpus
    figures = [perf.Figure(f"GPU {i}", "NVIDIA A100-SXM4-40GB", [gflops[i] / 1000], gpus[i]) for i in sorted(gflops)]
    result = perf.judge(
        "perf.matmul_tflops", "dgx", "matmul_tflops", figures, "ubergemm (FP32)", overrides={"matmul_tflops": 0}
    )
    assert result.status == "failed"
    assert result.message == "GPU 0: 6.698 TFLOP/s below 85% of its 7 mate(s)' median 19.19 TFLOP/s on this node"


def test_the_models_lower_bound_fails_every_gpu_below_it() -> None:
    # Without the class's override the H100 row applies: Azure's 48 GB/s (nd96isr_h100_v5.conf line 49).
    result = one(node_for(H100_X8, answers={checks.NVBANDWIDTH_COMMAND: NVBW_4090}), "perf.h2d_bandwidth")
    assert result.status == "failed"
    assert result.message.count("below the NVIDIA H100 80GB HBM3 lower bound 48 GB/s") == 8


def test_reference_table_rows_and_overrides() -> None:
    h100 = references.lookup("NVIDIA H100 80GB HBM3", "nccl_allreduce_busbw")
    assert h100 is not None and h100.lower == 460 and "nd96isr_h100_v5.conf line 52" in h100.source
    assert references.lookup("NVIDIA A100-SXM4-40GB", "p2p_bandwidth").lower == 235  # type: ignore[union-attr]
    assert references.lookup("Tesla V100-SXM2-32GB", "h2d_bandwidth").lower == 9  # type: ignore[union-attr]
    assert references.lookup("NVIDIA H100 80GB HBM3", "h2d_bandwidth", overrides={"h2d_bandwidth": 40}).lower == 40  # type: ignore[union-attr]
    matmul = references.lookup("NVIDIA H100 80GB HBM3", "matmul_tflops")
    # Measured achievable, not the data sheet's 989.4: ml-engineering's MAMF, bf16 (H200 the same).
    assert matmul is not None and matmul.target == 794.5 and matmul.lower == round(794.5 * references.ACHIEVED_FLOOR, 1)
    assert "compute/accelerator/README.md@744d01e1" in matmul.source
    assert references.lookup("NVIDIA H200", "matmul_tflops").target == 794.5  # type: ignore[union-attr]
    assert references.lookup("NVIDIA B200", "matmul_tflops").target == 1745.0  # type: ignore[union-attr]
    assert references.lookup("NVIDIA A100-SXM4-80GB", "matmul_tflops").target == 271.2  # type: ignore[union-attr]
    assert references.lookup("NVIDIA GB200", "nccl_allreduce_busbw").lower == 432  # type: ignore[union-attr]
    assert references.lookup("NVIDIA H200", "memory_bandwidth").target == 4010  # type: ignore[union-attr]
    # Where no measured figure was found the data sheet's peak stays, at 60%.
    assert references.lookup("NVIDIA L40S", "matmul_tflops").lower == round(362 * references.PEAK_FLOOR, 1)  # type: ignore[union-attr]
    assert references.lookup("NVIDIA GeForce RTX 2070", "nccl_allreduce_busbw") is None
    for _, metric, ref in references.rows():
        assert ref.source and ref.lower <= ref.target, metric


def test_real_peer_matrix_judges_each_pair() -> None:
    six = replay.smi_xml(replay.Profile("h100", 6, "hgx-h100", "six"))
    node = node_for(six, answers={checks.NVBANDWIDTH_COMMAND: NVBW_A6000_P2P}, references=LOW)
    result = one(node, "perf.p2p_bandwidth")
    assert result.status == "passed" and result.message.startswith("30 figure(s), lowest 21.8 GB/s (GPU 0 -> GPU 5)")
    strict = node_for(six, answers={checks.NVBANDWIDTH_COMMAND: NVBW_A6000_P2P}, references={"p2p_bandwidth": 22})
    failing = one(strict, "perf.p2p_bandwidth")
    assert failing.status == "failed" and failing.message.count("lower bound 22 GB/s") == 8


def test_real_nccl_table_takes_the_largest_size() -> None:
    assert tool_output.nccl_busbw(NCCL_2GPU) == [20.34, 21.86]
    two = capture("dual-rtx-2070-590.44.01-v13.xml")
    result = one(node_for(two, answers={checks.NCCL_COMMAND: NCCL_2GPU}), "perf.nccl_allreduce")
    assert result.status == "passed"
    assert "no reference for NVIDIA GeForce RTX 2070 and no mates (recorded, not judged)" in result.message
    assert "2 GPUs: median 21.1 GB/s of 2 sample(s), spread 1.52" in result.evidence
    low = one(
        node_for(two, answers={checks.NCCL_COMMAND: NCCL_2GPU}, references={"nccl_allreduce_busbw": 30}),
        "perf.nccl_allreduce",
    )
    assert (
        low.status == "failed"
        and low.message == "2 GPUs: 21.1 GB/s below the NVIDIA GeForce RTX 2070 lower bound 30 GB/s"
    )


def test_a_busy_gpu_is_never_passed_and_names_the_process() -> None:
    busy = replay.smi_xml(replay.PROFILES["busy-gpu"])
    node = node_for(busy, answers={checks.NVBANDWIDTH_COMMAND: NVBW_4090}, references=LOW)
    result = one(node, "perf.h2d_bandwidth")
    assert result.status == "failed"
    assert result.message == ("GPU 2 (00000000:3A:00.0) is busy, not judged: pid 4242 python3 (30000 MiB)")
    two = capture("dual-rtx-2070-590.44.01-v13.xml")
    nccl = one(node_for(two, answers={checks.NCCL_COMMAND: NCCL_2GPU}), "perf.nccl_allreduce")
    assert nccl.status == "passed"
    # A display server alone (type G, telegraf's a10g.xml records Xorg) is not a load.
    assert not parse_xml(capture("a10g.xml")).gpus[0].compute_processes


def test_a_real_capture_of_a_busy_gpu() -> None:
    # telegraf's tesla-t4.xml was recorded while Xorg (type G) and a python process (type C) ran on the GPU.
    t4 = capture("tesla-t4.xml")
    [gpu] = parse_xml(t4).gpus
    assert [p.type for p in gpu.processes] == ["G", "C"]
    result = one(node_for(t4, answers={checks.NVBANDWIDTH_COMMAND: NVBW_4090}), "perf.h2d_bandwidth")
    assert (result.status, result.message) == (
        "failed",
        "GPU 0 (00000000:00:1E.0) is busy, not judged: pid 5762 python (1005 MiB)",
    )


def test_missing_tools_skip_with_what_to_install() -> None:
    node = node_for(H100_X8)  # nvbandwidth, nccl-tests and torch absent (BARE)
    assert one(node, "perf.h2d_bandwidth").message == (
        "nothing here measures it: build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, "
        "or pip install torch built for CUDA (gpuready's probe measures through it)"
    )
    assert one(node, "perf.nccl_allreduce").message.startswith(
        "nothing here runs NCCL, and NVIDIA packages no all_reduce_perf"
    )
    assert one(node, "perf.matmul_tflops").status == "skipped"
    # torch without CUDA (a CPU-only wheel): the probe says so and the checks skip as without torch.
    cpu_only = '{"probe": "gpuready", "torch": "2.15.0+cpu", "device": "cuda", "no_cuda": "torch sees no CUDA device"}'
    assert one(node_for(H100_X8, answers={checks.PROBE_COMMAND: cpu_only}), "perf.matmul_tflops").status == "skipped"


def test_bad_or_partial_output_is_one_clear_line() -> None:
    partial = NVBW_4090.split("Running device_to_host_memcpy_ce.")[0]  # cut before the second test
    node = node_for(H100_X8, answers={checks.NVBANDWIDTH_COMMAND: partial}, references=LOW)
    assert one(node, "perf.h2d_bandwidth").status == "passed"
    d2h = one(node, "perf.d2h_bandwidth")
    assert (d2h.status, d2h.message) == ("failed", "nvbandwidth printed no device_to_host_memcpy_ce figure (exit 0)")
    garbage = {checks.NVBANDWIDTH_COMMAND: Answer(checks.NVBANDWIDTH_COMMAND, 139, "Segmentation fault\n", "")}
    assert "\n" not in one(node_for(H100_X8, answers=garbage), "perf.h2d_bandwidth").message
    torch_broken = {checks.PROBE_COMMAND: Answer(checks.PROBE_COMMAND, 1, "Traceback (most recent call last):\n", "")}
    probe = one(node_for(H100_X8, answers=torch_broken), "perf.matmul_tflops")
    assert (probe.status, probe.message) == (
        "failed",
        "gpuready's probe failed (exit 1): the probe printed no JSON result",
    )
    nccl = one(
        node_for(capture("dual-rtx-2070-590.44.01-v13.xml"), answers={checks.NCCL_COMMAND: "# nThread 1\n"}),
        "perf.nccl_allreduce",
    )
    assert (nccl.status, nccl.message) == ("failed", "no bus bandwidth figure in the output (exit 0)")


def test_a_gpu_the_probe_cannot_compute_on_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    def broken(torch: object, device: str, cpu: bool) -> float:
        raise RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported")

    monkeypatch.setattr(gpu_probe, "memory_bandwidth", broken)
    output = json.dumps(gpu_probe.run({"matmul", "memory"}, 1, True, 1))
    result = one(
        node_for(capture("a100-sxm4-80gb-535.54.03.q.xml"), answers={checks.PROBE_COMMAND: output}),
        "perf.memory_bandwidth",
    )
    assert (result.status, result.message) == (
        "failed",
        "gpuready's probe could not measure: GPU 0: RuntimeError: CUDA error: out of memory",
    )


def test_the_run_wide_mates_fail_a_host_slow_against_the_others() -> None:
    values = tool_output.nvbandwidth_per_gpu(NVBW_4090, tool_output.H2D_TEST)
    gpus = parse_xml(H100_X8).gpus
    host_a = [perf.Figure(f"GPU {i}", gpus[i].name, v, gpus[i]) for i, v in values.items()]
    # A one-GPU host: no mates on its node; its GPU 0 at half the recording's 25.50.
    host_b = [perf.Figure("GPU 0", gpus[0].name, [12.75], gpus[0])]
    a = perf.judge("perf.h2d_bandwidth", "a", "h2d_bandwidth", host_a, "nvbandwidth", overrides=LOW)
    b = perf.judge("perf.h2d_bandwidth", "b", "h2d_bandwidth", host_b, "nvbandwidth", overrides=LOW)
    assert (a.status, b.status) == ("passed", "passed")
    judged = perf.across_run([a, b])
    assert [c.status for c in judged] == ["passed", "failed"]
    assert judged[1].message == (
        "GPU 0: 12.75 GB/s below 85% of the run's median 26.19 GB/s (8 NVIDIA H100 80GB HBM3 mate(s) on 2 hosts)"
    )
    assert type(judged[1]) is Check  # reported as a plain check


def test_dcgm_level_and_its_time_limit() -> None:
    xml = capture("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml")
    node = node_for(xml)
    node.settings = node.settings.model_copy(
        update={"node_checks": node.settings.node_checks.model_copy(update={"dcgm_level": 3})}
    )
    command = checks.dcgm_command(3)
    assert "timeout 2700 dcgmi diag -r 3 -j" in command
    node.record(Answer(command, 124, "", ""))
    result = one(node, "diag.dcgm")
    assert (result.status, result.message) == ("failed", "dcgmi diag -r 3 ran past its 2700 s limit and was stopped")


def run_probe(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, gpu_probe.__file__, "--device", "cpu", "--samples", "2", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_real_probe_runs_end_to_end_on_cpu_and_is_judged() -> None:
    # The same code a GPU node runs, on two CPU stand-ins (float32, gloo): its figures are the CPU's. The
    # per-GPU figures are judged on a one-GPU node (CPU timings are too noisy for the mates rule).
    output = run_probe("--cpu-devices", "2")
    data = tool_output.probe(output)
    assert data["device"] == "cpu" and len(data["gpus"][0]["matmul_tflops"]) == 2
    a100 = capture("a100-sxm4-80gb-535.54.03.q.xml")  # one GPU, nothing running on it (the T4 capture is busy)
    low = {"matmul_tflops": 1e-9, "memory_bandwidth": 1e-9, "h2d_bandwidth": 1e-9, "d2h_bandwidth": 1e-9}
    node = node_for(a100, answers={checks.PROBE_COMMAND: output}, references=low)
    for id in ("perf.matmul_tflops", "perf.memory_bandwidth", "perf.h2d_bandwidth", "perf.d2h_bandwidth"):
        result = one(node, id)
        assert result.status == "passed", (id, result.message)
        assert result.message.startswith("1 figure(s), lowest ") and "gpuready's probe (torch" in result.evidence
    high = dict.fromkeys(low, 1e9)
    slow = one(node_for(a100, answers={checks.PROBE_COMMAND: output}, references=high), "perf.matmul_tflops")
    assert slow.status == "failed" and "below the NVIDIA A100-SXM4-80GB lower bound 1e+09 TFLOP/s" in slow.message
    two = capture("dual-rtx-2070-590.44.01-v13.xml")
    node = node_for(two, answers={checks.PROBE_COMMAND: output})
    nccl = one(node, "perf.nccl_allreduce")
    assert nccl.status == "passed" and "recorded, not judged" in nccl.message, nccl.message
    p2p = one(node, "perf.p2p_bandwidth")
    assert p2p.status == "passed" and "GPU 0 -> GPU 1" in p2p.evidence


def test_all_reduce_runs_at_the_message_size_its_bound_was_measured_at() -> None:
    # Azure's bounds: 16G on 80 GB and larger GPUs (nd96isr_h100_v5.conf line 52), 8G on 40 GB (nd96asr_v4.conf
    # line 57); nccl-tests and the probe send the same, by the smallest GPU's memory.
    for row, size in (("NVIDIA H100 80GB HBM3", "16G"), ("NVIDIA H200", "16G"), ("NVIDIA A100-SXM4-40GB", "8G")):
        ref = references.lookup(row, "nccl_allreduce_busbw")
        assert ref is not None and f" 1 {size})" in ref.source, row
    assert '-ge 64000 ] 2>/dev/null; then S=16G; elif [ "${M:-0}" -ge 32000 ]' in checks.NCCL_COMMAND
    mib, gib = 2**20, 2**30
    assert gpu_probe.allreduce_bytes(81559 * mib) == 16 * gib  # H100 80GB HBM3 (nvidia-smi's memory.total)
    assert gpu_probe.allreduce_bytes(143771 * mib) == 16 * gib  # H200
    assert gpu_probe.allreduce_bytes(40960 * mib) == 8 * gib  # A100 40GB
    assert gpu_probe.allreduce_bytes(16384 * mib) == 2 * gib  # V100 16GB, T4
