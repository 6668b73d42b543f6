"""The vCenter password from Ansible Vault instead of the environment: provisioning works, and the
password reaches no artifact (the modules declare it no_log)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.vsphere.conftest import PASSWORD, Vcsim, provision

pytestmark = pytest.mark.slow


def test_provision_with_the_password_in_ansible_vault(vcsim: Vcsim, tmp_path: Path, artifacts: Path) -> None:
    inventory = vcsim.inventory()
    vault_password = tmp_path / "vault-password"
    vault_password.write_text("a-vault-password")
    encrypted = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-vault"),
            "encrypt_string",
            "--vault-password-file",
            str(vault_password),
            PASSWORD,
            "--name",
            "vcenter_password",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    (inventory / "group_vars" / "vcenter").mkdir(parents=True)
    (inventory / "group_vars" / "vcenter" / "vault.yml").write_text(encrypted)

    env = {"GPUREADY_VCENTER_PASSWORD": "", "ANSIBLE_VAULT_PASSWORD_FILE": str(vault_password)}
    done = provision(str(inventory), artifacts, env, "--allow-power-off")
    assert done.returncode == 0, done.stdout + done.stderr

    assert vcsim.ats() == {"DC0_H0": True, "DC0_H1": True}
    for path in artifacts.rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(errors="replace"), path
