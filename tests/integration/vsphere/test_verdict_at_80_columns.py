"""`validate vsphere` and `provision cluster --check` on the simulated site, read at 80 columns: one screen.

Before provisioning, every ESXi host and VM fails several checks (the read-back once printed 316 lines here);
the plan names the ESXi hosts to reboot, which only the user can do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.integration.vsphere.conftest import Vcsim, provision
from tests.verdict_shape import assert_fits, failing_lines

pytestmark = pytest.mark.slow


def test_read_back_and_plan_fit_one_screen(vcsim: Vcsim, env: dict[str, str], artifacts: Path) -> None:
    inventory = str(vcsim.inventory())
    env = {**env, "COLUMNS": "80"}
    done = gpuready("validate", "vsphere", "-i", inventory, "--artifacts", str(artifacts), env=env)
    assert done.returncode == 1, done.stderr
    text = assert_fits(done.stdout)
    [run] = artifacts.iterdir()
    summary = json.loads((run / "summary.json").read_text())
    # Counted as the user knows them: ESXi hosts and VMs, not 6 "hosts".
    assert text[0] == "validate vsphere: FAILED · 2 ESXi hosts, 4 VMs, 6 failing"
    assert text[1] == f"inventory: {inventory}"
    failing = {c["id"] for c in summary["checks"] if c["status"] == "failed"}
    assert set(failing_lines(text)) == failing
    assert "✗ vsphere.passthrough.0000:ca:00.0  failed on 1 host: DC0_H0" in text
    assert "    ATS is off: expected VMkernel.Boot.atsSupport true, found False" in text
    # The failures and their remedies take the screen; what was not tested is counted there, its reason in report.md.
    assert "not tested (skipped): 4 checks, 1 reason in report.md" in text
    assert "0 GPU attached: no pair to check" in (run / "report.md").read_text()
    assert json.loads((run / "FAILURE").read_text())["counts"] == summary["counts"]

    plan = provision(inventory, artifacts, env, "--check")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    text = assert_fits(plan.stdout)
    assert text[0] == "provision cluster (check mode): PASSED · 1 host; vSphere: 2 ESXi hosts, 4 VMs"
    # What only the user can do, without -v.
    assert "  → put DC0_H0 in maintenance mode and reboot it (vsphere.ats_reboot)" in text
    assert "  → put DC0_H1 in maintenance mode and reboot it (vsphere.ats_reboot)" in text
    # ATS is pending on both ESXi hosts: one line, its reason naming neither.
    assert "  ATS would be set; effective at the next boot: 2 checks (vsphere.ats_reboot)" in text
    assert all(len(line) <= 80 for line in plan.stderr.splitlines() if not line.startswith(("plan: ", "provision ")))
