"""What the Slurm health check does with a verdict: drain with gpuready's reason, resume only its own drains,
never act on a check that could not run."""

from __future__ import annotations

import pytest

from gpuready.core.results import Check
from gpuready.validate import slurm
from gpuready.validate.slurm import NodeState, decide

XID = Check("gpu.xid", "gn01", "failed", "hardware Xid in the last 24 h: 79 (GPU has fallen off the bus)", "", "x")
IDLE = NodeState("gn01", "IDLE", "")
OURS = NodeState("gn01", "IDLE+DRAIN", slurm.reason(XID))
ADMIN = NodeState("gn01", "IDLE+DRAIN", "admin: new DIMMs")


def test_the_reason_is_prefix_check_id_and_message_on_one_short_line() -> None:
    assert slurm.reason(XID) == "gpuready: gpu.xid: hardware Xid in the last 24 h: 79 (GPU has fallen off the bus)"
    long = Check("gpu.ecc_volatile", "gn01", "failed", "GPU 1 (00000000:1C:00.0): 2 errors;\n" * 10)
    cut = slurm.reason(long)
    assert len(cut) == slurm.REASON_LIMIT and cut.endswith("...") and "\n" not in cut
    assert slurm.reason(Check("a.b", "h", "failed", "é\x1b[31m")) == "gpuready: a.b: [31m"


@pytest.mark.parametrize(
    ("status", "failure", "node", "kind"),
    [
        ("failed", XID, IDLE, "drain"),
        ("failed", XID, OURS, "none"),  # already drained for this
        ("failed", XID, NodeState("gn01", "IDLE+DRAIN", "gpuready: gpu.count: 7 GPUs"), "drain"),  # ours: updated
        ("failed", XID, ADMIN, "keep"),
        ("passed", None, OURS, "resume"),
        ("passed", None, ADMIN, "none"),
        ("passed", None, NodeState("gn01", "DOWN+NOT_RESPONDING", "gpuready: gpu.xid: x"), "none"),
        ("error", None, OURS, "none"),  # could not run: neither drained nor resumed
        ("error", None, IDLE, "none"),
    ],
)
def test_decide(status: str, failure: Check | None, node: NodeState, kind: str) -> None:
    assert decide(status, failure, node).kind == kind


def test_scontrol_show_node_reason_keeps_its_spaces_without_slurms_user_and_time() -> None:
    # as Debian's scontrol 22.05 printed it in the lab (tests/integration/node/test_slurm_health_check.py)
    text = (
        "NodeName=gn01 Arch=x86_64 CoresPerSocket=1\n"
        "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Reason=gpuready: gpu.xid: hardware Xid [root@2026-11-28T17:46:49]\n"
        "   Comment=gpuready: gpu.xid: remedy: do z\n"
    )
    assert slurm.parse_node("gn01", text) == NodeState(
        "gn01", "IDLE+DRAIN", "gpuready: gpu.xid: hardware Xid", "gpuready: gpu.xid: remedy: do z"
    )


def test_the_drain_carries_the_remedy_in_the_comment() -> None:
    action = decide("failed", XID, IDLE)
    assert (action.reason, action.comment) == (slurm.reason(XID), "gpuready: gpu.xid: remedy: x")
