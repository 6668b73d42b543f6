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
