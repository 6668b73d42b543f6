"""Provisioning's driver.fabric_manager says what `validate gpu-node`'s node.fabric_manager says of the same GPUs.

A started Fabric Manager is not a working fabric: each GPU registers with the NVSwitch fabric afterwards, and
nvidia-smi -q -x reports it per GPU (<fabric><state>/<status>). The role's finding template is rendered by Ansible's
templating engine with recorded nvidia-smi -q -x captures (tests/fixtures/gpu: an HGX H100 on driver 580.105.08,
Completed/Success; an A100 SXM4, N/A: before Hopper no registration is reported) and one-field edits of them where
no capture of a fault exists (a GPU still "In Progress", a registration that ended in "Failure"); validate's own
check judges the same text.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuready.validate.node import checks
from tests.unit.node.test_captures import capture, edit, node_for, one
from tests.unit.provision.test_reboot_pending import render

H100 = "hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml"
A100 = "a100-sxm4-v12.xml"
ACTIVE = {checks.FABRIC_MANAGER_COMMAND: "active\n"}


def provisioned(xml: str, rc: int = 0, **overrides: Any) -> dict[str, str]:
    """driver.fabric_manager once Fabric Manager runs at the driver's version and nvidia-smi -q -x answered ``xml``."""
    variables = {
        "nvidia_driver_plan": {
            "version_package": "nvidia-driver-580-server",
            "fabric_manager": {
                "package": "nvidia-fabricmanager-580",
                "packages": ["nvidia-fabricmanager-580"],
                "service": "nvidia-fabricmanager",
                "nvlink5": False,
            },
        },
        "nvidia_driver_fm_installed": "580.105.08",
        "nvidia_driver_installed": "580.105.08",
        "nvidia_driver_manage_services": True,
        "nvidia_driver_reboot_pending": False,
        "nvidia_driver_module_refused": False,
        "nvidia_driver_fabric_wait_s": 120,
        "nvidia_driver_fabric_xml": {"rc": rc, "stdout": xml, "stderr": ""},
        "ansible_check_mode": False,
    }
    return render("nvidia_driver", "fabric-manager.yml.j2", **(variables | overrides))


CASES = {
    "registered": (H100, None),
    "still training": (H100, ("fabric/state", "In Progress")),
    "registration failed": (H100, ("fabric/status", "Failure")),
    "no registration before Hopper": (A100, None),
    "A100 never registering": (A100, ("fabric/state", "In Progress")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_provisioning_and_validate_agree_on_the_fabric(case: str) -> None:
    name, field = CASES[case]
    xml = capture(name) if field is None else edit(capture(name), *field)
    validated, _ = one(node_for(xml, answers=ACTIVE, nvswitch=True), "node.fabric_manager")
    assert provisioned(xml)["status"] == validated


def test_a_gpu_still_training_fails_after_the_wait_and_says_which() -> None:
    finding = provisioned(edit(capture(H100), "fabric/state", "In Progress"))
    assert finding["status"] == "failed"
    assert finding["message"] == (
        "Fabric Manager 580.105.08 running, but the fabric is not up after 120 s: GPU 0: fabric In Progress/Success"
    )
    assert "journalctl -u nvidia-fabricmanager" in finding["remedy"]


def test_a_registered_fabric_passes_with_each_gpus_state_as_evidence() -> None:
    finding = provisioned(capture(H100))
    assert finding["status"] == "passed"
    assert finding["message"].endswith("every GPU registered with the fabric (Completed/Success)")
    assert "fabric state/status per GPU: 0=Completed/Success" in finding["evidence"]


def test_running_is_not_passed_when_nvidia_smi_cannot_answer() -> None:
    finding = provisioned("", rc=9)
    assert finding["status"] == "failed"
    assert "names no GPU fabric state" in finding["message"]
