"""What a node verdict means for its Kubernetes node: the condition's status, reason and message, and unknown
(checks that could not run) never read as failed or as passed. The API side is in
tests/integration/kubernetes/test_node_conditions.py, against the lab's real API server."""

from __future__ import annotations

import re

import pytest

from gpuready.core.platforms.node_condition import MESSAGE_LIMIT, judge, reason, taint_key
from gpuready.core.results import Check, errored, failed, passed, skipped

#: The API conventions' reason pattern (metav1.Condition's Reason validation).
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def _rows(*checks: Check) -> list[dict[str, str]]:
    return [{k: getattr(c, k) for k in ("id", "status", "message", "remedy")} for c in checks]


@pytest.mark.parametrize(
    ("check_id", "expected"),
    [
        ("gpu.ecc_volatile", "GpuEccVolatile"),
        ("perf.h2d_bandwidth", "PerfH2dBandwidth"),
        ("diag.dcgm", "DiagDcgm"),
        ("2nd.check", "Check2ndCheck"),
        ("...", "Check"),
    ],
)
def test_a_check_id_is_a_camelcase_reason_the_api_accepts(check_id: str, expected: str) -> None:
    assert reason(check_id) == expected
    assert REASON.match(reason(check_id))


def test_a_failed_check_sets_the_condition_naming_its_id_message_and_remedy_first_failure_first() -> None:
    j = judge(
        _rows(
            passed("gpu.count", "n1", "4 GPUs"),
            failed("gpu.ecc_volatile", "n1", "GPU 1: 2 uncorrectable", remedy="reset GPU 1 or replace it"),
            failed("gpu.xid", "n1", "Xid 48"),
            errored("perf.h2d_bandwidth", "n1", "timed out"),
        )
    )
    assert (j.state, j.condition_status, j.reason, j.check_id) == (
        "failed",
        "True",
        "GpuEccVolatile",
        "gpu.ecc_volatile",
    )
    assert j.message == (
        "gpuready: gpu.ecc_volatile: GPU 1: 2 uncorrectable; remedy: reset GPU 1 or replace it; also failed: gpu.xid"
    )


def test_checks_that_could_not_run_are_unknown_not_failed_and_not_passed() -> None:
    j = judge(_rows(passed("gpu.count", "n1", "4 GPUs"), errored("gpu.query", "n1", "nvidia-smi timed out")))
    assert j.state == "unknown" and j.check_id == "gpu.query"


def test_passed_and_skipped_checks_clear_the_condition() -> None:
    j = judge(_rows(passed("gpu.count", "n1", "4 GPUs"), skipped("diag.dcgm", "n1", "not installed")))
    assert (j.state, j.condition_status, j.reason) == ("passed", "False", "ChecksPassed")
    assert j.message == "gpuready: checks passed (1 passed, 1 skipped)"


def test_a_long_message_is_cut_to_one_line_within_the_limit() -> None:
    j = judge(_rows(failed("gpu.xid", "n1", "Xid 79\n" + "x" * 5000)))
    assert len(j.message) == MESSAGE_LIMIT and "\n" not in j.message and j.message.endswith("…")


def test_the_taint_is_the_one_mark_nodes_sets() -> None:
    assert taint_key() == "gpuready.io/validation-failed"


def test_the_verdict_is_read_from_a_pod_log_that_holds_stderr_too() -> None:
    from gpuready.validate.node.kube_pods import verdict_in

    verdict = '{\n  "schema": "gpuready.node-verdict/v1",\n  "checks": [{"id": "gpu.xid"}]\n}'
    log = f"WARNING gpuready: a note before\n{verdict}\ngpuready: n1: failed (1 failed; quick set, 0.1s)\n"
    assert verdict_in(log) == {"schema": "gpuready.node-verdict/v1", "checks": [{"id": "gpu.xid"}]}
    with pytest.raises(ValueError):
        verdict_in("Error: failed to create containerd task\n{ not json\n")
