"""A node with the driver and DCGM only (no torch, nvbandwidth or nccl-tests: the defaults without the nccl_tests
layer, which a one-GPU class or `gpuready.nccl_tests.enabled: false` leaves out), replayed over real SSH: the perf
checks measure through DCGM and say so (profile ``dcgm-only``: dcgmi replays DCGM's recorded figures,
lab/recordings/SOURCES.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ModuleTmp, gpuready
from tests.integration.node.conftest import start

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    yield from start(module_tmp("dcgm"), ["dcgm-only"])


def test_a_node_with_only_dcgm_is_measured_by_dcgm(lab: dict[str, Any], artifacts: Path) -> None:
    done = gpuready(
        "validate", "gpu-node", "-i", str(lab["inventory"]), "--artifacts", str(artifacts), "--only", "perf,diag"
    )
    assert "Traceback" not in done.stderr + done.stdout
    checks = {c["id"]: c for c in json.loads(next(artifacts.glob("*/summary.json")).read_text())["checks"]}
    status = {i: c["status"] for i, c in checks.items() if i.startswith(("perf.", "diag."))}
    assert status == {
        "diag.dcgm": "passed",
        # DCGM's pcie plugin: 12.13 and 13.07-13.08 GB/s on gen3 x16 links (lower bound 11 GB/s), mates alike.
        "perf.h2d_bandwidth": "passed",
        "perf.d2h_bandwidth": "passed",
        # The recording's stress test failed GPUs 0, 2, 3 against DCGM's target; GPU 1 is below its mates.
        "perf.matmul_tflops": "failed",
        # DCGM skipped memory_bandwidth on the recording's GPUs; DCGM 3 ships no nvbandwidth and prints no peer
        # figure; DCGM runs no NCCL without nccl-tests.
        "perf.memory_bandwidth": "skipped",
        "perf.p2p_bandwidth": "skipped",
        "perf.nccl_allreduce": "skipped",
    }
    for id in ("perf.h2d_bandwidth", "perf.d2h_bandwidth", "perf.matmul_tflops"):
        assert checks[id]["evidence"].startswith("measured by DCGM's "), id
    matmul = checks["perf.matmul_tflops"]["message"]
    assert matmul.startswith("GPU 1 (00000000:1C:00.0): 0.577 TFLOP/s below 85% of its 3 mate(s)' median 1.1 TFLOP/s")
    assert matmul.endswith("DCGM's sm_stress failed GPU 0, GPU 2, GPU 3 against DCGM's own floor for the SKU")
    assert checks["perf.memory_bandwidth"]["message"].startswith("DCGM's memory_bandwidth did not run here")
    assert "--tags nccl_tests" in checks["perf.nccl_allreduce"]["message"]
    # DCGM 3 prints no peer figure and ships no nvbandwidth: the skip says so and names the DCGM 4 package.
    assert checks["perf.p2p_bandwidth"]["message"].startswith("DCGM is installed here without nvbandwidth")
    assert "datacenter-gpu-manager-4-cuda12" in checks["perf.p2p_bandwidth"]["message"]
