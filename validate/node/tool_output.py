"""Parsers of what the performance tools print: nvbandwidth, nccl-tests, gpuready's probe.

Each returns samples per GPU (or pair, or node); a run that printed a figure several times (a loop over
nvbandwidth, nccl-tests' ``-N`` cycles, the probe's ``--samples``) gives several samples. An answer in a
shape they do not know raises :class:`~gpuready.validate.node.nvsmi.ParseError` with one line saying why.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuready.validate.node.nvsmi import ParseError

#: nvbandwidth's test cases the checks read (nvbandwidth -l), as Azure's health checks run them.
H2D_TEST = "host_to_device_memcpy_ce"
D2H_TEST = "device_to_host_memcpy_ce"
P2P_TEST = "device_to_device_memcpy_read_ce"

_RUNNING = re.compile(r"^\s*Running (\S+?)\.?\s*$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def nvbandwidth_matrices(text: str) -> dict[str, list[dict[tuple[int, int], float]]]:
    """Every matrix nvbandwidth printed: {test: [matrix per run]}, a matrix {(row, column): GB/s}.

    A matrix starts at its ``... bandwidth (GB/s)`` title and belongs to the test named by the ``Running
    <test>.`` line before it or the ``SUM <test> <total>`` line after it. Cells that read N/A (no peer
    access, the diagonal) are left out; a test nvbandwidth waived (``Waiving <test>.``) is absent.
    """
    found: dict[str, list[dict[tuple[int, int], float]]] = {}
    running: str | None = None
    matrix: dict[tuple[int, int], float] | None = None
    columns: list[int] = []

    def close(test: str | None) -> None:
        nonlocal matrix
        if test is not None and matrix:
            found.setdefault(test, []).append(matrix)
        matrix = None

    for line in text.splitlines():
        cells = line.split()
        start = _RUNNING.match(line)
        if start:
            close(running)
            running = start.group(1)
        elif line.startswith("SUM") and len(cells) >= 2:
            close(cells[1])
            running = None
        elif "bandwidth (GB/s)" in line:
            close(running)
            matrix, columns = {}, []
        elif matrix is not None and cells:
            if all(c.isdigit() for c in cells) and not columns:
                columns = [int(c) for c in cells]
            elif columns and cells[0].isdigit() and len(cells) > 1:
                row = int(cells[0])
                for column, cell in zip(columns, cells[1:], strict=False):
                    if _NUMBER.fullmatch(cell):
                        matrix[(row, column)] = float(cell)
    close(running)
    return found


def nvbandwidth_per_gpu(text: str, test: str) -> dict[int, list[float]]:
    """Host copies (one CPU row, a column per GPU): {GPU index: [GB/s per run]}."""
    samples: dict[int, list[float]] = {}
    for matrix in nvbandwidth_matrices(text).get(test, []):
        for (_, gpu), value in matrix.items():
            samples.setdefault(gpu, []).append(value)
    return samples


def nvbandwidth_per_pair(text: str, test: str = P2P_TEST) -> dict[tuple[int, int], list[float]]:
    """Peer copies (row -> column): {(a, b): [GB/s per run]} for every ordered pair that was measured."""
    samples: dict[tuple[int, int], list[float]] = {}
    for matrix in nvbandwidth_matrices(text).get(test, []):
        for pair, value in matrix.items():
            if pair[0] != pair[1]:
                samples.setdefault(pair, []).append(value)
    return samples


def nccl_busbw(text: str) -> list[float]:
    """nccl-tests ``all_reduce_perf``: the out-of-place and in-place bus bandwidth of every row at the
    largest size measured (``-N`` cycles print one row each); else the ``# Avg bus bandwidth`` line.

    A data row is ``size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong``
    (the root column came with nccl-tests 2.x), so the two busbw figures are the 6th and 2nd from the end.
    """
    rows: dict[int, list[float]] = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) < 11 or line.lstrip().startswith("#") or not cells[0].isdigit():
            continue
        try:
            rows.setdefault(int(cells[0]), []).extend([float(cells[-6]), float(cells[-2])])
        except ValueError:
            continue
    if rows:
        return rows[max(rows)]
    average = re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", text)
    return [float(average.group(1))] if average else []


def probe(text: str) -> dict[str, Any]:
    """The probe's JSON object (the last line that starts with a brace: torch may warn before it)."""
    lines = [line for line in text.splitlines() if line.startswith("{")]
    if not lines:
        raise ParseError("the probe printed no JSON result")
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise ParseError(f"the probe's result is not JSON: {e}") from e
    if not isinstance(data, dict) or data.get("probe") != "gpuready":
        raise ParseError("the probe's result is not gpuready's probe output")
    return data


#: What DCGM's diagnostic plugins write into ``dcgmi diag -j``, per GPU (NVIDIA/DCGM at commit 72fa3fe):
#: the pcie plugin's copy bandwidths (``addBandwidthInfo`` in nvvs/plugin_src/pcie/PcieMain.cpp; DCGM 3 and the
#: older JSON prefix each message with ``GPU N``, DCGM 4 files it under the result's entity), the targeted
#: stress plugin's achieved GEMM rate (``GPU N relative stress level`` in TargetedStress_wrapper.cpp, and
#: ``DCGM_FR_STRESS_LEVEL_MSG`` of dcgmlib/dcgm_errors.h where it fell short), the diagnostic plugin's
#: (``GPU N calculated at approximately X gigaflops`` in DiagnosticPlugin.cpp) and the memory bandwidth
#: plugin's figure where it fell short (``DCGM_FR_MEMORY_BANDWIDTH_MSG``; that plugin is closed source and
#: prints no figure of a pass that gpuready has seen).
_DCGM_PATTERNS = {
    "h2d": re.compile(r"(?:GPU (\d+) )?Host to GPU bandwidth:\s*(\d+(?:\.\d+)?) GB/s"),
    "d2h": re.compile(r"(?:GPU (\d+) )?GPU to Host bandwidth:\s*(\d+(?:\.\d+)?) GB/s"),
    "stress_gflops": re.compile(
        r"(?:GPU (\d+) )?relative stress level:?\s*(\d+(?:\.\d+)?)"
        r"|Max stress level of (\d+(?:\.\d+)?) did not (?:reach|exceed) desired stress level of [\d.]+ for GPU (\d+)"
    ),
    "diagnostic_gflops": re.compile(r"GPU (\d+) calculated at approximately (\d+(?:\.\d+)?) gigaflops"),
    "memory_bandwidth": re.compile(r"GPU (\d+) only achieved a memory bandwidth of (\d+(?:\.\d+)?) GB/s"),
}
#: The plugins whose messages each figure may come from (DCGM 2 called targeted stress's sibling sm_stress).
DCGM_TESTS = {
    "h2d": ("pcie",),
    "d2h": ("pcie",),
    "stress_gflops": ("targeted_stress", "sm_stress"),
    "diagnostic_gflops": ("diagnostic",),
    "memory_bandwidth": ("memory_bandwidth",),
}


def _dcgm_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise ParseError("dcgmi diag printed no JSON")
    try:
        data = json.loads(text[start:])
    except json.JSONDecodeError as e:
        raise ParseError(f"dcgmi diag's JSON does not parse: {e}") from e
    if not isinstance(data, dict):
        raise ParseError("dcgmi diag's JSON is not an object")
    body = data.get("DCGM Diagnostic") or data.get("DCGM GPU Diagnostic")
    if not isinstance(body, dict):
        raise ParseError("dcgmi diag's JSON has no 'DCGM Diagnostic' object")
    return body


def _result_gpu(result: dict[str, Any]) -> int | None:
    """The GPU a result belongs to: DCGM 4's entity (entity_group GPU), else a single ``gpu_ids``."""
    if result.get("entity_group") == "GPU" and isinstance(result.get("entity_id"), int):
        return int(result["entity_id"])
    ids = str(result.get("gpu_ids", "")).strip()
    return int(ids) if ids.isdigit() else None


def _messages(result: dict[str, Any]) -> list[str]:
    """A result's info and warning texts (info as a list or, in DCGM 3's text-joined form, one string)."""
    found: list[str] = []
    for key in ("info", "warnings"):
        value = result.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                found.append(item)
            elif isinstance(item, dict) and isinstance(item.get("warning"), str):
                found.append(item["warning"])
    return found


def dcgm_tests(text: str) -> dict[str, list[dict[str, Any]]]:
    """``dcgmi diag -j``: {test name: [its results]} over every category."""
    tests: dict[str, list[dict[str, Any]]] = {}
    for category in _dcgm_json(text).get("test_categories") or []:
        for test in (category or {}).get("tests") or []:
            if isinstance(test, dict) and isinstance(test.get("name"), str):
                results = [r for r in test.get("results") or [] if isinstance(r, dict)]
                tests.setdefault(test["name"], []).extend(results)
    return tests


def dcgm_figures(text: str) -> dict[str, dict[int, list[float]]]:
    """The figures DCGM's plugins reported in ``dcgmi diag -j``: {kind: {GPU index: [values]}}, kinds as in
    :data:`_DCGM_PATTERNS` (GB/s; the GEMM rates in GFLOP/s as DCGM prints them)."""
    tests = dcgm_tests(text)
    found: dict[str, dict[int, list[float]]] = {}
    for kind, pattern in _DCGM_PATTERNS.items():
        for name in DCGM_TESTS[kind]:
            for result in tests.get(name, []):
                owner = _result_gpu(result)
                for message in _messages(result):
                    for match in pattern.finditer(message):
                        groups = [g for g in match.groups()]
                        if kind == "stress_gflops" and groups[2] is not None:
                            gpu, value = groups[3], groups[2]
                        else:
                            gpu, value = groups[0], groups[1]
                        index = int(gpu) if gpu is not None else owner
                        if index is not None and value is not None:
                            found.setdefault(kind, {}).setdefault(index, []).append(float(value))
    return found


def dcgm_status(text: str, *tests: str) -> dict[int, tuple[str, str]]:
    """Each GPU's (test, status) in ``dcgmi diag -j`` (Pass, Fail, Skip, Warn as DCGM writes them), from the first
    of ``tests`` that did not skip it (DCGM 2 and 3 ran sm_stress where DCGM 4 runs targeted_stress)."""
    statuses: dict[int, tuple[str, str]] = {}
    found = dcgm_tests(text)
    for test in tests:
        for result in found.get(test, []):
            gpu, status = _result_gpu(result), result.get("status")
            if gpu is None or not isinstance(status, str):
                continue
            if gpu not in statuses or statuses[gpu][1].lower().startswith("skip"):
                statuses[gpu] = (test, status)
    return statuses


#: How :func:`dcgm_figures_line` names each kind, with its unit.
_DCGM_KIND_NAMES = {
    "h2d": ("pcie host-to-GPU", "GB/s"),
    "d2h": ("pcie GPU-to-host", "GB/s"),
    "stress_gflops": ("stress GEMM", "GFLOP/s"),
    "diagnostic_gflops": ("diagnostic GEMM", "GFLOP/s"),
    "memory_bandwidth": ("memory_bandwidth shortfall", "GB/s"),
}


def dcgm_figures_line(text: str) -> str:
    """One line of the figures a ``dcgmi diag -j`` run carries (levels 2 and up), or empty: the evidence of a
    level run, where the perf checks judge the named-test run instead."""
    parts = []
    for kind, per_gpu in dcgm_figures(text).items():
        what, unit = _DCGM_KIND_NAMES[kind]
        values = ", ".join(f"GPU {gpu} {'/'.join(f'{v:g}' for v in vs)}" for gpu, vs in sorted(per_gpu.items()))
        parts.append(f"{what} {unit}: {values}")
    return "DCGM's figures: " + "; ".join(parts) if parts else ""
