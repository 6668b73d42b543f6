"""--mark-nodes: each node's verdict from its checks, and the partial Nodes the role applies for them."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuready.core.errors import BadInput
from gpuready.core.results import errored, failed, passed, skipped
from gpuready.validate.node.marks import control_plane, label_value, verdicts
from tests.unit.kubernetes.test_manifests import NODE_MARKS, _render

DAY = dt.date(2026, 11, 23)


def test_a_host_with_a_failed_check_fails_naming_each_failed_check_once() -> None:
    a, b = "stor1.r5a.local", "stor2.r5a.local"
    checks = [
        passed("gpu.count", a),
        skipped("diag.dcgm", a, "not installed"),
        failed("gpu.ecc_volatile", b, "2 uncorrectable"),
        failed("gpu.xid", b, "Xid 48"),
        failed("gpu.xid", b, "Xid 48 on GPU 1"),
        errored("perf.h2d_bandwidth", b, "timed out"),
    ]
    marks, unknown = verdicts(checks, DAY)
    # The verdicts the role's manifests are rendered from in test_manifests.py, as this function makes them.
    published = NODE_MARKS["node_validation_marks_verdicts"]
    assert marks == {a: published[a], b: published[b]}
    assert (marks[b]["failed_checks"], marks[b]["taint_value"]) == (["gpu.ecc_volatile", "gpu.xid"], "gpu.ecc_volatile")
    assert unknown == []


def test_a_host_that_could_not_be_checked_is_left_as_it_was() -> None:
    marks, unknown = verdicts([errored("node.reach", "down", "unreachable"), passed("gpu.count", "up")], DAY)
    assert list(marks) == ["up"] and unknown == ["down"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("gpu.ecc_volatile", "gpu.ecc_volatile"),
        ("driver/version check!", "driver-version-check"),
        ("x" * 80, "x" * 63),
        ("-a.b_", "a.b"),
    ],
)
def test_label_values_follow_kubernetes_rules(text: str, value: str) -> None:
    assert label_value(text) == value


def test_passed_nodes_get_the_date_label_failed_ones_the_failed_label_unknown_ones_nothing() -> None:
    docs = {d["metadata"]["name"]: d for d in _render("node_validation_marks", "node-marks.yml.j2", NODE_MARKS)}
    assert set(docs) == {"stor1.r5a.local", "stor2.r5a.local"}
    ok, bad = docs["stor1.r5a.local"], docs["stor2.r5a.local"]
    assert ok["metadata"]["labels"] == {"gpuready.io/validation": "passed", "gpuready.io/validated": "2026-11-23"}
    assert ok["metadata"]["annotations"] == {"gpuready.io/validation": "passed 2026-11-23"}
    # The date label is not in what this manager applies for a failed node, so the API server removes it;
    # taints are never applied (an atomic list: the apply would own every taint), they are patched.
    assert bad["metadata"]["labels"] == {"gpuready.io/validation": "failed"}
    assert bad["metadata"]["annotations"] == {"gpuready.io/validation": "failed 2026-11-23: gpu.ecc_volatile, gpu.xid"}
    assert "spec" not in ok and "spec" not in bad


def test_marking_needs_a_control_plane_host() -> None:
    class Inventory:
        path = "inv"

        def hosts(self, group: str) -> list[str]:
            return []

    with pytest.raises(BadInput, match="kube_control_plane"):
        control_plane(Inventory())


def _taint_patches(found: list[dict]) -> dict[str, list[dict]]:
    overrides = {**NODE_MARKS, "node_validation_marks_found": {"resources": found}}
    text_docs = _render("node_validation_marks", "taints.yml.j2", overrides)
    return {p["name"]: p["patch"] for doc in text_docs for p in doc}


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
OURS = {"key": "gpuready.io/validation-failed", "value": "gpu.ecc_volatile", "effect": "NoSchedule"}


def _node(name: str, taints: list[dict] | None) -> dict:
    return {"metadata": {"name": name}, "spec": {} if taints is None else {"taints": taints}}


def test_the_taint_is_added_beside_the_others_and_tested_against_what_was_read() -> None:
    patches = _taint_patches([_node("stor1.r5a.local", [GPU_TAINT]), _node("stor2.r5a.local", [GPU_TAINT])])
    assert patches == {
        "stor2.r5a.local": [
            {"op": "test", "path": "/spec/taints", "value": [GPU_TAINT]},
            {"op": "replace", "path": "/spec/taints", "value": [GPU_TAINT, OURS]},
        ]
    }


def test_a_node_without_taints_gets_the_list_and_a_passing_node_loses_only_gpureadys() -> None:
    stale = {**OURS, "value": "gpu.xid"}
    patches = _taint_patches([_node("stor1.r5a.local", [stale, GPU_TAINT]), _node("stor2.r5a.local", None)])
    assert patches["stor1.r5a.local"][1] == {"op": "replace", "path": "/spec/taints", "value": [GPU_TAINT]}
    assert patches["stor2.r5a.local"] == [{"op": "add", "path": "/spec/taints", "value": [OURS]}]


def test_nodes_already_marked_as_their_verdict_get_no_patch() -> None:
    assert _taint_patches([_node("stor1.r5a.local", [GPU_TAINT]), _node("stor2.r5a.local", [OURS])]) == {}
