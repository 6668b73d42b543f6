"""The two rate checks exactly at their limits, on real captures with one named field edit each (as
test_captures does): DCGM's corrected-error rate (10 per hour) fails at the limit, DCGM's PCIe replay rate
(8 per minute) passes at it and fails above it."""

from __future__ import annotations

import pytest

from gpuready.validate.node import checks
from tests.unit.node.test_captures import capture, edit, node_for, one

#: (capture, the field edited, the node's uptime as /proc/uptime says it, the check)
CORRECTED = (
    "a100-sxm4-v12.xml",
    "ecc_errors/volatile/dram_correctable",
    "7200.00 10000.00\n",
    "gpu.ecc_correctable_rate",
)
REPLAYS = ("tesla-t4.xml", "pci/replay_counter", "600.00 1000.00\n", "gpu.pcie_replay")


@pytest.mark.parametrize(
    ("case", "value", "status", "message"),
    [
        (CORRECTED, "19", "passed", "at most 9.5 corrected errors/h (< 10/h)"),
        (CORRECTED, "20", "failed", "20 corrected in 2.0 h = 10.0/h >= 10/h"),
        (REPLAYS, "80", "passed", "at most 8.00 PCIe replays/min (<= 8/min)"),
        (REPLAYS, "81", "failed", "81 PCIe replays in 10 min = 8.10/min > 8/min"),
    ],
    ids=["corrected-below", "corrected-at-limit", "replays-at-limit", "replays-above"],
)
def test_rates_at_their_limits(case: tuple[str, str, str, str], value: str, status: str, message: str) -> None:
    name, field, uptime, check_id = case
    xml = edit(capture(name), field, value)
    got, said = one(node_for(xml, answers={checks.UPTIME_COMMAND: uptime}), check_id)
    assert got == status and said.endswith(message), said
