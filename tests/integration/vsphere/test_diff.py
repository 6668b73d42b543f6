"""`provision cluster --tags vsphere --check --diff` against vcsim: every task that would change shows its
diff -- ATS per ESXi host and the VMs' advanced settings (whose modules return no diff, built from what they
return), the hosts' passthrough devices compared sorted (only passthruEnabled changes, no PCI address moves)
and the GPUs each VM gets -- and nothing changes (read back with VMware's govc)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.vsphere.conftest import Vcsim, provision

pytestmark = pytest.mark.slow


def test_check_diff_shows_every_vsphere_change_and_no_reorder(
    vcsim: Vcsim, env: dict[str, str], artifacts: Path
) -> None:
    inventory = vcsim.inventory()
    ats = vcsim.ats()
    assert set(ats.values()) == {False}

    check = provision(inventory, artifacts, env, "--check", "--diff")
    assert check.returncode == 0, check.stdout + check.stderr
    run = sorted(p for p in artifacts.iterdir() if p.is_dir())[-1]
    diffs = (run / "diffs.txt").read_text()
    tasks = set(re.findall(r"^── (.+): \d+ host\(s\)", diffs, re.M))
    assert tasks == {
        "ESXi | Set ATS (VMkernel.Boot.atsSupport)",
        "ESXi | Enable passthrough for the planned GPUs",
        "VMware | Set the P2P and 64-bit MMIO advanced settings",
        "VMware | Attach the planned GPUs and reserve the memory",
    }, diffs
    assert "no diff from its module" not in diffs

    for host in ats:
        assert (
            f"--- before: {host}\n+++ after: {host}\n@@ -1 +1 @@\n"
            "-VMkernel.Boot.atsSupport = false\n+VMkernel.Boot.atsSupport = true\n"
        ) in diffs
    for vm in (p.rsplit("/", 1)[-1] for p in vcsim.find("m")):
        assert f"+++ after: {vm}\n@@ -0,0 +1,4 @@\n+pciPassthru.64bitMMIOSizeGB = " in diffs
    assert "+pciPassthru.use64bitMMIO = TRUE" in diffs

    # The passthrough lists come in no set order from the module: compared sorted, only the switch changes.
    passthrough = diffs.split("── ESXi | Enable passthrough for the planned GPUs", 1)[1].split("\n── ", 1)[0]
    changed = [line for line in passthrough.splitlines() if line[:1] in ("+", "-") and line[:3] not in ("+++", "---")]
    assert changed and set(changed) == {'-            "passthruEnabled": false', '+            "passthruEnabled": true'}
    assert len(changed) == 2 * 7  # the 4 GPUs of DC0_H0 and the 3 of DC0_H1

    assert "diff: " in check.stdout and "every diff: " in check.stdout
    assert vcsim.ats() == ats
