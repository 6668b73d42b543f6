"""The vCenter password from Ansible Vault instead of the environment: provisioning works, and the
password reaches no artifact (the modules declare it no_log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.vsphere.conftest import PASSWORD, Vcsim, password_in_vault, provision

pytestmark = pytest.mark.slow


def test_provision_with_the_password_in_ansible_vault(vcsim: Vcsim, tmp_path: Path, artifacts: Path) -> None:
    inventory = vcsim.inventory()
    env = password_in_vault(inventory, tmp_path)
    done = provision(str(inventory), artifacts, env, "--allow-power-off")
    assert done.returncode == 0, done.stdout + done.stderr

    assert vcsim.ats() == {"DC0_H0": True, "DC0_H1": True}
    for path in artifacts.rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(errors="replace"), path
