"""The two rate checks exactly at their limits, on real captures with one named field edit each (as
test_captures does): DCGM's corrected-error rate (10 per hour) fails at the limit, DCGM's PCIe replay rate
(8 per minute) passes at it and fails above it."""

from __future__ import annotations

import pytest

from gpuready.validate.node import checks
from tests.unit.node.test_captures import capture, edit, node_for, one


@pytest.mark.parametrize(
    ("value", "status", "message"),
    [
        ("19", "passed", "at most 9.5 corrected errors/h (< 10/h)"),
        ("20", "failed", "20 corrected in 2.0 h = 10.0/h >= 10/h"),
    ],
)
def test_corrected_errors_fail_at_the_limit(value: str, status: str, message: str) -> None:
    xml = edit(capture("a100-sxm4-v12.xml"), "ecc_errors/volatile/dram_correctable", value)
    two_hours = {checks.UPTIME_COMMAND: "7200.00 10000.00\n"}
    got, said = one(node_for(xml, answers=two_hours), "gpu.ecc_correctable_rate")
    assert got == status and said.endswith(message), said


@pytest.mark.parametrize(
    ("value", "status", "message"),
    [
        ("80", "passed", "at most 8.00 PCIe replays/min (<= 8/min)"),
        ("81", "failed", "81 PCIe replays in 10 min = 8.10/min > 8/min"),
    ],
)
def test_pcie_replays_fail_above_the_limit(value: str, status: str, message: str) -> None:
    xml = edit(capture("tesla-t4.xml"), "pci/replay_counter", value)
    ten_minutes = {checks.UPTIME_COMMAND: "600.00 1000.00\n"}
    got, said = one(node_for(xml, answers=ten_minutes), "gpu.pcie_replay")
    assert got == status and said.endswith(message), said
