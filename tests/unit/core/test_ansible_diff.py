"""The before/after text of a changed task, from module results recorded against the labs (tests/fixtures/
ansible-results/SOURCES.md): lists compared sorted, diffs built for the vSphere modules that return none,
and each definition of a multi-document kubernetes.core.k8s apply."""

from __future__ import annotations

import copy
import json
from typing import Any

from gpuready.core.ansible_diff import of_result, sorted_lists
from tests.conftest import ROOT

RESULTS = ROOT / "tests" / "fixtures" / "ansible-results"


def recorded(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return result


def changed_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in ("+", "-") and not line.startswith(("+++", "---"))]


def test_a_list_in_another_order_is_compared_sorted() -> None:
    assert sorted_lists({"b": [3, 1, {"x": [2, 1]}], "a": "text"}) == {"b": [1, 3, {"x": [1, 2]}], "a": "text"}
    res = recorded("vmware_host_passthrough-check.json")
    first = res["results"][0]["diff"]
    # the capture has the same four GPUs in another order before and after
    order = [[d["device_id"] for d in first[side]["DC0_H0"]] for side in ("before", "after")]
    assert order[0] != order[1] and sorted(order[0]) == sorted(order[1])

    text = of_result(res, "community.vmware.vmware_host_passthrough")
    lines = changed_lines(text)
    # only passthruEnabled changes: 4 GPUs on DC0_H0 and 3 on DC0_H1, each one line before and one after
    assert lines == 7 * ['-            "passthruEnabled": false', '+            "passthruEnabled": true']
    assert "--- before: DC0_H0" in text and "+++ after: DC0_H1" in text


def test_a_reorder_shows_no_change_and_an_order_that_is_the_only_difference_is_shown() -> None:
    res = recorded("vmware_host_passthrough-check.json")
    item = res["results"][0]
    # field edits of the capture: the devices after are those before, reversed, one of them enabled
    after = copy.deepcopy(item["diff"]["before"]["DC0_H0"])[::-1]
    after[0]["passthruEnabled"] = True
    item["diff"]["after"]["DC0_H0"] = after
    del res["results"][1]
    text = of_result(res, "community.vmware.vmware_host_passthrough")
    assert changed_lines(text) == ['-            "passthruEnabled": false', '+            "passthruEnabled": true']

    # a module that says it changed a list only by its order (a container's args, where order matters):
    # the sorted lists are equal, so the order is what is shown
    args = {
        "before": {"args": ["--fail-on-init-error", "--mig-strategy"]},
        "after": {"args": ["--mig-strategy", "--fail-on-init-error"]},
    }
    assert changed_lines(of_result({"changed": True, "diff": args})) == [
        '-        "--fail-on-init-error",',
        '-        "--mig-strategy"',
        '+        "--mig-strategy",',
        '+        "--fail-on-init-error"',
    ]


def test_vm_advanced_settings_are_shown_from_the_settings_the_module_changed() -> None:
    res = recorded("vm_advanced_settings-check.json")
    assert "diff" not in res
    text = of_result(res, "vmware.vmware.vm_advanced_settings")
    assert "--- before: DC0_H0_VM1" in text
    assert changed_lines(text) == [
        "+pciPassthru.64bitMMIOSizeGB = 256",
        "+pciPassthru.RelaxACSforP2P = true",
        "+pciPassthru.allowP2P = true",
        "+pciPassthru.use64bitMMIO = TRUE",
    ]
    # a setting the VM had is shown with its old value
    res["updated_settings"]["pciPassthru.64bitMMIOSizeGB"]["old"] = "128"
    assert "-pciPassthru.64bitMMIOSizeGB = 128" in changed_lines(of_result(res, "vmware.vmware.vm_advanced_settings"))
    # another module's result without a diff gets none
    assert of_result(res, "vmware.vmware.vm_powerstate") == ""


def test_ats_is_shown_for_each_esxi_host_the_option_would_change_on() -> None:
    res = recorded("vmware_host_config_manager-check.json")
    text = of_result(res, "community.vmware.vmware_host_config_manager")
    for host in ("DC0_H0", "DC0_H1"):
        assert f"--- before: {host}\n+++ after: {host}\n" in text
    assert changed_lines(text) == 2 * ["-VMkernel.Boot.atsSupport = false", "+VMkernel.Boot.atsSupport = true"]
    # an item the module left alone shows nothing
    res["results"][1]["changed"] = False
    assert text.count("atsSupport = true") == 2
    assert of_result(res, "community.vmware.vmware_host_config_manager").count("atsSupport = true") == 1


def test_each_object_of_a_multi_document_k8s_apply_is_shown() -> None:
    res = recorded("k8s-node-labels-check.json")
    assert "diff" not in res and len(res["result"]["results"]) == 2
    text = of_result(res, "kubernetes.core.k8s")
    for node in ("stor1.lab.local", "stor2.lab.local"):
        assert f"--- before: Node {node}\n" in text
    assert changed_lines(text).count('+            "nvidia.com/gpu.present": "true",') == 2
    res["result"]["results"][0]["changed"] = False
    assert "stor1.lab.local" not in of_result(res, "kubernetes.core.k8s")
