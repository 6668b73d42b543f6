"""DCGM as a measuring source of the perf.* checks: the figures of real ``dcgmi diag -j`` outputs, judged
against DCGM's own per-SKU floors and the GPUs' mates (fixtures: tests/fixtures/gpu/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.core.results import Check
from gpuready.lab import replay
from gpuready.validate.node import checks, perf, references, tool_output
from gpuready.validate.node.checks import commands
from gpuready.validate.node.checks import perf as perf_checks
from gpuready.validate.node.node import Answer
from gpuready.validate.node.nvsmi import parse_xml
from tests.unit.node.test_captures import FIXTURES, node_for

#: DCGM's own JSON test string with per-GPU figures (NVVS JSON of DCGM 3: "gpu_ids" per result).
DCGM3_X4 = (FIXTURES / "dcgm" / "dcgmi-diag-per-gpu-json-x4-testdiagmanagerstrings.txt").read_text()
#: A DCGM 4 test object as NVIDIA/DCGM issue #215 posted it (entity per result; figures for 2 of 8 GPUs).
DCGM4_DIAGNOSTIC = (FIXTURES / "dcgm" / "dcgmi-diag-json-4.x-x8-diagnostic-dcgm-issue-215.txt").read_text()
H100_X4 = replay.smi_xml(replay.Profile("h100", 4, "hgx-h100", "four H100 of the lab"))


def one(node: object, id: str) -> Check:
    return checks.run_check(next(c for c in checks.CATALOGUE if c.id == id), node)  # type: ignore[arg-type]


def in_envelope(test_object: str) -> str:
    """The issue's test object inside the document dcgmi diag -j writes around its tests (dcgmi/Diag.cpp:
    "DCGM Diagnostic" > "test_categories" > a category's "tests"); its trailing comma, where the issue's cut
    ends, dropped."""
    body = test_object.rstrip().removesuffix(",")
    return '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [' + body + "]}]}}"


def memory_shortfall(text: str, gpu: int, achieved: str, required: str) -> str:
    """One named result edit of the DCGM 3 recording: GPU ``gpu``'s memory_bandwidth result failed, its warning
    as DCGM formats a shortfall (DCGM_FR_MEMORY_BANDWIDTH_MSG, dcgmlib/dcgm_errors.h)."""
    skipped = f'"status": "SKIP",\n{" " * 32}"warnings": [\n'
    head, found, tail = text.partition('"name": "memory_bandwidth"')
    result = tail.index(f'"gpu_ids": "{gpu}"')
    start = tail.index(skipped, result)
    warning = f"GPU {gpu}: The memory bandwidth test is skipped for this GPU."
    shortfall = f"GPU {gpu} only achieved a memory bandwidth of {achieved} GB/s, failing to meet {required} GB/s"
    edited = tail[start:].replace(skipped, skipped.replace("SKIP", "FAIL"), 1)
    return head + found + tail[:start] + edited.replace(warning, shortfall + " for test 0", 1)


def test_dcgm3_json_carries_each_gpus_copy_and_gemm_figures() -> None:
    figures = tool_output.dcgm_figures(DCGM3_X4)
    assert figures["h2d"] == {0: [12.13], 1: [12.13], 2: [12.13], 3: [12.13]}
    assert figures["d2h"] == {0: [13.08], 1: [13.07], 2: [13.07], 3: [13.07]}
    # GPU 1 passed with its info line; GPUs 0, 2, 3 fell short, their figure in DCGM_FR_STRESS_LEVEL's warning.
    assert figures["stress_gflops"] == {0: [2128.7], 1: [577.0], 2: [1096.5], 3: [1099.7]}
    assert "memory_bandwidth" not in figures  # skipped on every GPU of the recording
    assert tool_output.dcgm_status(DCGM3_X4, "memory_bandwidth") == dict.fromkeys(
        range(4), ("memory_bandwidth", "SKIP")
    )
    # targeted_stress skipped every GPU; sm_stress, its DCGM 2-3 sibling, ran: each GPU's status is sm_stress's.
    stress = tool_output.dcgm_status(DCGM3_X4, *tool_output.DCGM_TESTS["stress_gflops"])
    assert stress == {
        0: ("sm_stress", "FAIL"),
        1: ("sm_stress", "PASS"),
        2: ("sm_stress", "FAIL"),
        3: ("sm_stress", "FAIL"),
    }


def test_dcgm4_json_files_figures_under_each_entity() -> None:
    text = in_envelope(DCGM4_DIAGNOSTIC)
    assert tool_output.dcgm_figures(text) == {"diagnostic_gflops": {0: [859.08], 1: [859.08]}}
    assert tool_output.dcgm_status(text, "diagnostic") == dict.fromkeys(range(8), ("diagnostic", "Pass"))


def test_a_level_1_run_carries_no_figure() -> None:
    text = (FIXTURES / "dcgm" / "dcgmi-diag-r1-json-3.1.0-x8-jsonresulttests.txt").read_text()
    assert tool_output.dcgm_figures(text) == {}


def test_a_node_with_only_dcgm_measures_by_dcgm_and_names_it() -> None:
    node = node_for(H100_X4, answers={checks.DCGM_PERF_COMMAND: DCGM3_X4})
    h2d = one(node, "perf.h2d_bandwidth")
    assert h2d.evidence.startswith("measured by DCGM's pcie plugin (dcgmi diag -r pcie,targeted_stress,memory_")
    # 12.13 GB/s on an H100's gen5 x16 link: below the link's 70% (44.1 GB/s); the recording's GPUs are not H100s.
    assert h2d.status == "failed" and h2d.message.count("below the NVIDIA H100 80GB HBM3 lower bound 44.1 GB/s") == 4
    matmul = one(node, "perf.matmul_tflops")
    assert matmul.status == "failed"
    assert "GPU 1 (00000000:2A:00.0): 0.577 TFLOP/s below the NVIDIA H100 80GB HBM3 lower bound 27.79 TFLOP/s" in (
        matmul.message
    )
    assert "below 85% of its 3 mate(s)' median 1.1 TFLOP/s on this node" in matmul.message
    assert f"{references._DCGM_SKUS} line 150" in matmul.evidence
    memory = one(node, "perf.memory_bandwidth")
    assert (memory.status, memory.message) == (
        "skipped",
        "DCGM's memory_bandwidth did not run here (skipped for this GPU or not in this DCGM)",
    )


def test_dcgm_memory_bandwidth_is_judged_by_its_figure_where_it_falls_short() -> None:
    short = memory_shortfall(DCGM3_X4, 2, "1500.00", "1905.00")
    assert tool_output.dcgm_figures(short)["memory_bandwidth"] == {2: [1500.0]}
    result = one(node_for(H100_X4, answers={checks.DCGM_PERF_COMMAND: short}), "perf.memory_bandwidth")
    assert result.status == "failed"
    assert result.message == "GPU 2 (00000000:3A:00.0): 1500 GB/s below the NVIDIA H100 80GB HBM3 lower bound 1905 GB/s"


def test_dcgm_passes_without_a_figure_are_dcgms_verdict_and_say_so() -> None:
    # The recording's memory_bandwidth results with their status edited SKIP -> PASS (four named fields; the
    # plugin prints no figure of a pass that gpuready has seen).
    head, found, tail = DCGM3_X4.partition('"name": "memory_bandwidth"')
    rest = tail.index('"name": "sm_stress"')
    passed = head + found + tail[:rest].replace('"status": "SKIP"', '"status": "PASS"') + tail[rest:]
    assert tool_output.dcgm_status(passed, "memory_bandwidth") == dict.fromkeys(range(4), ("memory_bandwidth", "PASS"))
    result = one(node_for(H100_X4, answers={checks.DCGM_PERF_COMMAND: passed}), "perf.memory_bandwidth")
    assert result.status == "passed"
    assert result.message.startswith("DCGM's memory_bandwidth passed on 4 GPU(s): each at least DCGM's floor")
    assert "measured by DCGM's memory_bandwidth plugin" in result.evidence


def test_gpus_dcgm_printed_no_figure_for_are_named() -> None:
    # The diagnostic test, filed under targeted_stress's name: figures for GPUs 0 and 1 only.
    text = in_envelope(DCGM4_DIAGNOSTIC.replace('"name" : "diagnostic"', '"name" : "targeted_stress"', 1)).replace(
        "calculated at approximately 859.08 gigaflops during this test", "relative stress level\\t859.08"
    )
    eight = replay.smi_xml(replay.PROFILES["h100-x8"])
    result = one(node_for(eight, answers={checks.DCGM_PERF_COMMAND: text}, references={}), "perf.matmul_tflops")
    assert "no figure printed for GPU 2, GPU 3, GPU 4, GPU 5, GPU 6, GPU 7" in result.evidence


def test_dcgm_that_could_not_answer_is_one_line() -> None:
    stopped = {checks.DCGM_PERF_COMMAND: Answer(checks.DCGM_PERF_COMMAND, 124, "", "")}
    result = one(node_for(H100_X4, answers=stopped), "perf.matmul_tflops")
    assert result.status == "failed" and "ran past its time limit" in result.message
    garbage = {checks.DCGM_PERF_COMMAND: Answer(checks.DCGM_PERF_COMMAND, 1, "Error: unable to connect\n", "")}
    result = one(node_for(H100_X4, answers=garbage), "perf.matmul_tflops")
    assert result.status == "failed" and "\n" not in result.message and "no JSON" in result.message


def test_the_default_measuring_batch_runs_dcgm_plugins_bounded() -> None:
    assert commands.DCGM_PERF_COMMAND in commands.PERF_COMMANDS["perf.matmul_tflops"]
    assert "dcgmi diag -r pcie,targeted_stress,memory_bandwidth -p" in commands.DCGM_PERF_COMMAND
    assert "targeted_stress.test_duration=10" in commands.DCGM_PERF_COMMAND
    assert f"timeout {commands.DCGM_PERF_TIMEOUT} " in commands.DCGM_PERF_COMMAND
    assert commands.DCGM_PERF_TIMEOUT <= 120


def test_dcgm_floors_for_current_data_centre_gpus() -> None:
    for model in (
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 NVL",
        "NVIDIA H200",
        "NVIDIA H200 NVL",
        "NVIDIA B200",
        "NVIDIA GB200",
        "NVIDIA GB300",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA L40S",
        "NVIDIA L4",
    ):
        stress = references.lookup(model, "dcgm_stress_tflops")
        memory = references.lookup(model, "dcgm_memory_bandwidth")
        assert stress is not None and memory is not None, model
        assert "nvvs/diag-skus.yaml.in@72fa3fe line" in stress.source and stress.lower < stress.target
    h100 = references.lookup("NVIDIA H100 80GB HBM3", "dcgm_memory_bandwidth")
    assert h100 is not None and h100.lower == 1905.0
    assert references.lookup("NVIDIA H200", "dcgm_memory_bandwidth").lower == 2333.0  # type: ignore[union-attr]
    assert references.lookup("NVIDIA H200 NVL", "dcgm_memory_bandwidth").lower == 2212.5  # type: ignore[union-attr]
    # A DCGM figure is never judged against another tool's reference, nor another tool's against DCGM's.
    assert references.lookup("NVIDIA H100 80GB HBM3", "dcgm_stress_tflops").target == 29.25  # type: ignore[union-attr]
    assert references.lookup("NVIDIA H100 80GB HBM3", "matmul_tflops").target == 794.5  # type: ignore[union-attr]


def test_mates_tolerance_passes_a_5_percent_silicon_spread_and_fails_a_20_percent_straggler() -> None:
    gpus = parse_xml(replay.smi_xml(replay.PROFILES["h100-x8"])).gpus
    # Eight GPUs spread evenly over 5% (100 down to 95), the spread of one node's silicon.
    spread = [100 - 5 * i / 7 for i in range(8)]
    figures = [perf.Figure(f"GPU {i}", g.name, [v], g) for i, (g, v) in enumerate(zip(gpus, spread, strict=True))]
    result = perf.judge("perf.matmul_tflops", "n", "matmul_tflops", figures, "test", overrides={"matmul_tflops": 0})
    assert result.status == "passed", result.message
    # One GPU 20% below its mates (the others at 100): a straggler.
    straggler = [perf.Figure(f"GPU {i}", g.name, [80.0 if i == 5 else 100.0], g) for i, g in enumerate(gpus)]
    result = perf.judge("perf.matmul_tflops", "n", "matmul_tflops", straggler, "test", overrides={"matmul_tflops": 0})
    assert result.status == "failed"
    assert result.message == "GPU 5: 80 TFLOP/s below 85% of its 7 mate(s)' median 100 TFLOP/s on this node"


def test_a_dcgm_level_run_names_its_figures_in_the_evidence() -> None:
    # diag.dcgm at a level whose JSON carries figures (DCGM's own test string with sm_stress's failures).
    node = node_for(H100_X4, answers={checks.DCGM_COMMAND: DCGM3_X4})
    result = one(node, "diag.dcgm")
    assert result.status == "failed"
    first = result.evidence.splitlines()[0]
    assert first.startswith("DCGM's figures: pcie host-to-GPU GB/s: GPU 0 12.13, GPU 1 12.13")
    assert "stress GEMM GFLOP/s: GPU 0 2128.7, GPU 1 577, GPU 2 1096.5, GPU 3 1099.7" in first
    # A level-1 run has none: the evidence starts with the command, as before.
    level_1 = (FIXTURES / "dcgm" / "dcgmi-diag-r1-json-3.1.0-x8-jsonresulttests.txt").read_text()
    passed = one(node_for(H100_X4, answers={checks.DCGM_COMMAND: level_1}), "diag.dcgm")
    assert passed.status == "passed" and not passed.evidence.startswith("DCGM's figures")


def test_dcgm_warn_is_a_pass_with_a_warning() -> None:
    head, found, tail = DCGM3_X4.partition('"name": "memory_bandwidth"')
    rest = tail.index('"name": "sm_stress"')
    edited = (
        tail[:rest].replace('"status": "SKIP"', '"status": "PASS"').replace('"status": "PASS"', '"status": "WARN"', 1)
    )
    result = one(
        node_for(H100_X4, answers={checks.DCGM_PERF_COMMAND: head + found + edited + tail[rest:]}),
        "perf.memory_bandwidth",
    )
    assert result.status == "passed"
    assert result.message.startswith("DCGM's memory_bandwidth passed on 4 GPU(s) (1 with a warning): ")


def test_dcgm_runs_only_where_the_probe_cannot_measure() -> None:
    """A node whose torch sees a GPU is measured by the probe; DCGM's command says so and is not judged."""
    import os
    import subprocess
    import sys

    skipped = Answer(checks.DCGM_PERF_COMMAND, 0, "== measured by the probe\n", "")
    result = one(node_for(H100_X4, answers={checks.DCGM_PERF_COMMAND: skipped}), "perf.h2d_bandwidth")
    assert result.status == "skipped" and "measured by DCGM" not in result.evidence
    # This machine's torch (if any) sees no GPU, and it has no dcgmi: the real command falls through to DCGM's
    # absence instead of claiming the probe measured.
    path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    done = subprocess.run(
        ["sh", "-c", commands.DCGM_PERF_COMMAND], capture_output=True, text=True, timeout=120, env={"PATH": path}
    )
    assert done.stdout.strip() == "== no dcgmi", done.stdout + done.stderr


def _shell(command: str, path: str) -> Answer:
    """``command`` run by sh here, as the node's shell runs it, with ``path`` as its PATH."""
    import subprocess

    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60, env={"PATH": path})
    return Answer(command, done.returncode, done.stdout, done.stderr)


def test_peers_on_a_node_with_dcgm_3_only_skip_saying_dcgm_prints_none(tmp_path: Path) -> None:
    """The lab's driver+DCGM 3 node (its dcgmi replays DCGM's recorded JSON): nvbandwidth is found nowhere,
    DCGM 4's plugin folder included, so the skip names what DCGM 3 lacks and which DCGM ships nvbandwidth."""
    path = f"{replay.build('dcgm-only', tmp_path / 'dcgm-only')}:/usr/bin:/bin"
    nvbandwidth = _shell(checks.NVBANDWIDTH_COMMAND, path)
    assert nvbandwidth.stdout == "== not installed\n"
    dcgmi = _shell(commands.DCGMI_COMMAND, path)
    assert dcgmi.stdout.strip().endswith("/dcgmi")
    answers: dict[str, str | Answer] = {
        checks.NVBANDWIDTH_COMMAND: nvbandwidth,
        checks.PROBE_COMMAND: "== no torch\n",  # the probe command's own line where python3 has no torch
        checks.DCGM_PERF_COMMAND: DCGM3_X4,
        commands.DCGMI_COMMAND: dcgmi,
    }
    result = one(node_for(H100_X4, answers=answers), "perf.p2p_bandwidth")
    assert (result.status, result.message) == ("skipped", perf_checks.DCGM_PRINTS_NO_PEERS)
    assert result.message.startswith("DCGM is installed here without nvbandwidth")
    assert "DCGM 3 ships no nvbandwidth and its pcie plugin prints no peer-to-peer figure" in result.message
    assert "datacenter-gpu-manager-4-cuda12" in result.message
    # The DCGM 3 recording itself: the pcie plugin's info lines are host copies only, never a GPU-to-GPU figure.
    assert set(tool_output.dcgm_figures(DCGM3_X4)) == {"h2d", "d2h", "stress_gflops"}
    # Without DCGM the skip is the plain one, naming nvbandwidth.
    bare = _shell(commands.DCGMI_COMMAND, "/usr/bin:/bin")
    assert bare.stdout == "== no dcgmi\n"
    without = one(node_for(H100_X4, answers={**answers, commands.DCGMI_COMMAND: bare}), "perf.p2p_bandwidth")
    assert (without.status, without.message) == ("skipped", perf_checks.NO_COPY_TOOL)


def test_nccl_without_torch_or_nccl_tests_names_the_role_that_builds_it() -> None:
    answers: dict[str, str | Answer] = {
        checks.NCCL_COMMAND: "== not installed\n",
        checks.PROBE_COMMAND: "== no torch\n",
        checks.DCGM_PERF_COMMAND: DCGM3_X4,
    }
    result = one(node_for(H100_X4, answers=answers), "perf.nccl_allreduce")
    assert (result.status, result.message) == ("skipped", perf_checks.NO_NCCL_TOOL)
    assert "NVIDIA packages no all_reduce_perf" in result.message
    assert "`gpuready provision cluster --tags nccl_tests`" in result.message
    assert "links /usr/local/bin/all_reduce_perf" in result.message
    # What the remedy puts on PATH is what the check's command looks for.
    assert "command -v all_reduce_perf" in checks.NCCL_COMMAND


def test_the_dcgm_answer_is_read_only_where_nothing_measured_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads whether dcgmi is there only after nvbandwidth and the probe measured nothing (the batch asks
    it of every node, a `command -v` in the same session): a node where nvbandwidth measured is judged by it."""
    assert commands.PERF_COMMANDS["perf.p2p_bandwidth"][-1] == commands.DCGMI_COMMAND
    six = (FIXTURES / "nvbandwidth" / "rtx-a6000-x6-d2d-read-ce-v0.8-issue-50.txt").read_text()
    answers: dict[str, str | Answer] = {checks.NVBANDWIDTH_COMMAND: "== nvbandwidth /usr/bin/nvbandwidth\n" + six}
    node = node_for(H100_X4, answers=answers)
    asked: list[str] = []
    run = node.run
    monkeypatch.setattr(node, "run", lambda command: asked.append(command) or run(command))
    result = one(node, "perf.p2p_bandwidth")
    assert result.status != "skipped" and result.evidence.startswith("measured by /usr/bin/nvbandwidth")
    assert checks.NVBANDWIDTH_COMMAND in asked
    assert checks.PROBE_COMMAND not in asked and commands.DCGMI_COMMAND not in asked
