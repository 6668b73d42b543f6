"""Provisioning findings that only a reboot or a firmware reset finishes are pending: the driver waiting for its
boot, the services that start with it, ATS set in the NIC's non-volatile configuration. They fail nothing, say
what finishes them and which `validate gpu-node` check reads it back, and that check, or the role's next run after
the reboot, judges the same thing passed or failed: nothing stays pending once the reboot happened.

The roles' own templates are rendered by Ansible's templating engine (as the template lookup renders them), with
the variables the role's tasks set; mlxconfig's answers are NVIDIA's recorded ones (tests/fixtures/mlxconfig).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from gpuready.core.report import terminal, writers
from gpuready.core.results import PENDING, Check, RunResult
from gpuready.validate.node import nvsmi
from gpuready.validate.node.checks.commands import mlxconfig_command
from tests.conftest import ROOT
from tests.unit.node.test_captures import capture, node_for, one

ROLES = ROOT / "playbooks" / "roles"
MLXCONFIG = ROOT / "tests" / "fixtures" / "mlxconfig"
DEVICE = "/dev/mst/mt4123_pciconf0"


def render(role: str, template: str, **variables: Any) -> dict[str, str]:
    text = (ROLES / role / "templates" / template).read_text()
    out = Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))
    return yaml.safe_load(out)


def loaded(**overrides: Any) -> dict[str, str]:
    """driver.loaded after a first install of 550.54.15 on a node whose kernel still runs no nvidia module."""
    variables = {
        "nvidia_driver_installed": "550.54.15",
        "nvidia_driver_loaded": "",
        "nvidia_driver_nouveau_in_use": False,
        "nvidia_driver_smi": {},
        "nvidia_driver_plan": {"version_package": "cuda-drivers-550", "branch": "550"},
        "nvidia_driver_dkms_mok": "/var/lib/dkms/mok.pub",
        "nvidia_driver_manage_kernel": True,
        "nvidia_driver_reboot_needed": True,
        "nvidia_driver_allow_reboot": False,
        "ansible_facts": {"distribution": "Debian"},
        "ansible_check_mode": False,
    }
    return render("nvidia_driver", "loaded.yml.j2", **(variables | overrides))


def test_a_reboot_the_inventory_withholds_is_pending_and_names_the_check_that_reads_it_back() -> None:
    finding = loaded()
    assert finding["status"] == PENDING
    assert finding["message"] == (
        "reboot required: driver 550.54.15 installed, none loaded (gpuready.driver.allow_reboot is false)"
    )
    assert finding["remedy"] == (
        "reboot the node (or set gpuready.driver.allow_reboot: true and provision again), then run gpuready "
        "validate gpu-node: driver.nvidia_smi and driver.version pass once the kernel runs driver 550.54.15"
    )


def test_a_kernel_not_managed_here_is_pending_until_the_node_boots() -> None:
    finding = loaded(nvidia_driver_manage_kernel=False)
    assert finding["status"] == PENDING
    assert "the kernel is not managed here (nvidia_driver_manage_kernel is false)" in finding["message"]
    assert finding["remedy"].startswith("boot the node (or image), then run gpuready validate gpu-node: ")


def test_after_the_reboot_the_same_finding_is_passed_or_failed_never_pending() -> None:
    booted = {"nvidia_driver_loaded": "550.54.15", "nvidia_driver_reboot_needed": False}
    ok = loaded(**booted, nvidia_driver_smi={"stdout_lines": ["550.54.15"] * 8})
    assert (ok["status"], ok["message"]) == ("passed", "driver 550.54.15 loaded, nvidia-smi agrees")
    # Rebooted by gpuready (allowed), and the kernel still runs the old driver: a failure, not pending.
    old = loaded(nvidia_driver_allow_reboot=True, nvidia_driver_smi={"stdout_lines": ["535.183.01"]})
    assert old["status"] == "failed"


def test_a_secure_boot_refusal_stays_a_failure_a_reboot_does_not_fix() -> None:
    refused = {"msg": "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", "stderr": ""}
    assert loaded(nvidia_driver_modprobe=refused)["status"] == "failed"


def fabric_manager(**overrides: Any) -> dict[str, str]:
    variables = {
        "nvidia_driver_plan": {
            "version_package": "cuda-drivers-550",
            "fabric_manager": {
                "package": "nvidia-fabricmanager-550",
                "packages": ["nvidia-fabricmanager-550=550.54.15-1"],
                "service": "nvidia-fabricmanager",
                "nvlink5": False,
            },
        },
        "nvidia_driver_fm_installed": "550.54.15",
        "nvidia_driver_installed": "550.54.15",
        "nvidia_driver_manage_services": True,
        "nvidia_driver_reboot_pending": True,
        "nvidia_driver_module_refused": False,
        "nvidia_driver_fabric_wait_s": 120,
        "ansible_check_mode": False,
    }
    return render("nvidia_driver", "fabric-manager.yml.j2", **(variables | overrides))


def test_fabric_manager_waiting_for_the_new_driver_is_pending_then_passed() -> None:
    waiting = fabric_manager()
    assert waiting["status"] == PENDING
    assert waiting["message"] == "Fabric Manager 550.54.15 enabled; it starts with the new driver after the reboot"
    assert "node.fabric_manager passes once nvidia-fabricmanager is active" in waiting["remedy"]
    # After the reboot, running and every GPU registered (the recorded HGX H100's nvidia-smi -q -x): passed.
    registered = {"rc": 0, "stdout": capture("hgx-h100-80gb-hbm3-x8-580.105.08-v13.xml")}
    booted = fabric_manager(nvidia_driver_reboot_pending=False, nvidia_driver_fabric_xml=registered)
    assert booted["status"] == "passed"
    # Check mode decides nothing about reboots (driver.loaded says so): not pending there.
    assert fabric_manager(ansible_check_mode=True)["status"] == "skipped"


def recorded(name: str) -> str:
    return (MLXCONFIG / name).read_text()


def ats_row(text: str) -> str:
    """The recording with its one named edit (SOURCES.md): the parameter is ATS_ENABLED, GID(0) its True(1)."""
    return (
        text.replace("SRIOV_IB_ROUTING_MODE_P1", "ATS_ENABLED")
        .replace("GID(0)", "True(1)")
        .replace("GID(1)", "False(0)")
        .replace("LID(1)", "False(0)")
    )


def test_mlxconfig_current_and_next_boot_are_read_from_nvidias_recording() -> None:
    before, after = recorded("before-firmware-reset.txt"), recorded("after-firmware-reset.txt")
    assert nvsmi.parse_mlxconfig(before, "SRIOV_IB_ROUTING_MODE_P1") == ("GID(1)", "GID(0)")
    assert nvsmi.parse_mlxconfig(after, "SRIOV_IB_ROUTING_MODE_P1") == ("GID(0)", "GID(0)")
    # Without -e mlxconfig prints Next Boot alone: no Current to read.
    assert nvsmi.parse_mlxconfig("        ATS_ENABLED                         True(1)\n", "ATS_ENABLED") == (
        "",
        "True(1)",
    )


def fabric_ats(query: str, set_now: bool) -> dict[str, str]:
    return render(
        "fabric",
        "ats.yml.j2",
        fabric_ats_query={"results": [{"item": DEVICE, "stdout": query}]},
        fabric_ats_set={"results": [{"item": {"item": DEVICE}, "changed": set_now}]},
        ansible_check_mode=False,
    )


def test_ats_set_is_pending_on_this_run_and_every_run_until_the_firmware_reset() -> None:
    unset = recorded("before-firmware-reset.txt").replace("GID(0)", "GID(1)")  # Next Boot not set yet either
    first = fabric_ats(ats_row(unset), set_now=True)
    again = fabric_ats(ats_row(recorded("before-firmware-reset.txt")), set_now=False)
    for finding in (first, again):
        assert finding["status"] == PENDING, finding
        assert finding["message"] == (
            f"ATS set for the next boot on {DEVICE}: a firmware reset or reboot makes it active"
        )
        assert finding["remedy"] == (
            f"mlxfwreset -d {DEVICE} reset, or reboot the node; then run gpuready validate gpu-node: node.ats passes "
            "once mlxconfig -e shows ATS_ENABLED True(1) as the Current value"
        )
    after = fabric_ats(ats_row(recorded("after-firmware-reset.txt")), set_now=False)
    assert (after["status"], after["message"]) == ("passed", f"ATS already enabled on {DEVICE}")


@pytest.mark.parametrize(
    ("recording", "status"), [("before-firmware-reset.txt", "failed"), ("after-firmware-reset.txt", "passed")]
)
def test_validate_reads_ats_back_from_the_current_value(recording: str, status: str) -> None:
    fabric = {"type": "roce", "ports": ["mlx5_0"], "ats": True, "mst_devices": [DEVICE]}
    answers = {mlxconfig_command(DEVICE): ats_row(recorded(recording))}
    got, message = one(node_for(capture("a100-sxm4-v12.xml"), answers=answers, fabric=fabric), "node.ats")
    assert got == status, message
    if status == "failed":
        assert message == (
            f"ATS not enabled: {DEVICE}: False(0) (True(1) set for the next boot: firmware reset or reboot pending)"
        )


def test_a_fleet_waiting_for_its_reboot_passes_with_one_pending_line(tmp_path: Path) -> None:
    """Three nodes of one driver: exit 0, one reason for all of them, one thing left to do."""
    run = RunResult(command="provision cluster", inventory="inventories/example")
    for host in ("gn1", "gn2", "gn3"):
        run.add(Check(host=host, **loaded()), Check(host=host, **fabric_manager()))
    assert run.status == "passed" and run.exit_code() == 0
    assert run.counts()[PENDING] == 6
    from rich.console import Console

    console = Console(record=True, width=140, color_system=None, force_terminal=False, emoji=False)
    terminal.show(run, console)
    text = console.export_text().splitlines()
    start = text.index("pending (a reboot or an action outside gpuready finishes it):")
    assert text[start + 1 : start + 3] == [
        "  Fabric Manager 550.54.15 enabled; it starts with the new driver after the reboot: 3 hosts "
        "(driver.fabric_manager)",
        "  reboot required: driver 550.54.15 installed, none loaded (gpuready.driver.allow_reboot is false): 3 hosts "
        "(driver.loaded)",
    ], text
    writers.write_all(run, tmp_path)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "driver.loaded: pending on 3 host(s)" in html
    assert "driver.fabric_manager: pending on 3 host(s)" in html


def test_check_mode_says_ats_would_be_set_and_pending() -> None:
    """In check mode the set does not run (nothing changed): the device whose Next Boot is not True(1) would be."""
    unset = ats_row(recorded("before-firmware-reset.txt").replace("GID(0)", "GID(1)"))
    finding = render(
        "fabric",
        "ats.yml.j2",
        fabric_ats_query={"results": [{"item": DEVICE, "stdout": unset}]},
        fabric_ats_set={"results": [{"item": {"item": DEVICE}, "changed": False, "skipped": True}]},
        ansible_check_mode=True,
    )
    assert (finding["status"], finding["message"]) == (
        PENDING,
        f"ATS would be set for the next boot on {DEVICE}: a firmware reset or reboot makes it active",
    )
