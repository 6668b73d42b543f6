"""Inventories that used to pass the check and fail later, or fail with a misleading message: each is refused by
``gpuready inventory check`` with one line naming the cause and exit 2, and what is valid is accepted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.unit.core.test_bad_inputs import make_inventory, with_settings

ANSIBLE_VAULT = str(Path(sys.executable).parent / "ansible-vault")


def check(inv: Path, tmp: Path, *more: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return gpuready("inventory", "check", "-i", str(inv), "--artifacts", str(tmp / "runs"), *more, env=env)


def refused(done: subprocess.CompletedProcess[str], *says: str) -> None:
    """Exit 2, one line of gpuready's own on stderr (no Ansible warnings, no traceback), saying each of ``says``."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuready: error: "), done.stderr
    for text in says:
        assert text in lines[0], lines[0]


def vault(tmp: Path, *args: str) -> str:
    password = tmp / "vault-password"
    password.write_text("the-right-password\n")
    return subprocess.run(
        [ANSIBLE_VAULT, *args, "--vault-password-file", str(password)], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def wrong_password(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "wrong-password"
    path.write_text("not-the-password\n")
    return {"ANSIBLE_VAULT_PASSWORD_FILE": str(path)}


# ---------------------------------------------------------------- exit codes


def test_a_wrong_or_missing_vault_password_is_bad_input_before_anything_runs(
    tmp_path: Path, wrong_password: dict[str, str]
) -> None:
    inv = make_inventory(tmp_path)
    (inv / "group_vars" / "gpu_nodes").mkdir()
    (inv / "group_vars" / "gpu_nodes" / "vault.yml").write_text(
        vault(tmp_path, "encrypt_string", "s3cret-become", "--name", "ansible_become_password")
    )
    assert not {"ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST"} & set(os.environ)
    refused(check(inv, tmp_path), "vault.yml:1", "no vault password is given")
    refused(check(inv, tmp_path, env=wrong_password), "vault id 'default'", "does not open it")
    # A command that would run does not start either: before, the run went ahead and a task failed (exit 1).
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(tmp_path / "runs"), env=wrong_password)
    refused(done, "does not open it")
    right = {"ANSIBLE_VAULT_PASSWORD_FILE": str(tmp_path / "vault-password")}
    assert check(inv, tmp_path, env=right).returncode == 0


def test_a_damaged_vault_value_is_not_called_a_wrong_password(tmp_path: Path) -> None:
    """ansible-vault's own output with one edit: its last character cut off, as a paste that lost it."""
    inv = make_inventory(tmp_path)
    (inv / "group_vars" / "gpu_nodes").mkdir()
    whole = vault(tmp_path, "encrypt_string", "s3cret-become", "--name", "ansible_become_password").rstrip("\n")
    (inv / "group_vars" / "gpu_nodes" / "vault.yml").write_text(whole[:-1] + "\n")
    right = {"ANSIBLE_VAULT_PASSWORD_FILE": str(tmp_path / "vault-password")}
    done = check(inv, tmp_path, env=right)
    refused(done, "vault.yml:1", "not a whole Ansible Vault value")
    assert "does not open it" not in done.stderr


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"ansible_host": ["10.0.0.1", "10.0.0.2"]}, "ansible_host must be one host name or address, not a list"),
        ({"ansible_port": 70000}, "ansible_port 70000 is not a TCP port (1-65535)"),
        ({"ansible_host": "10.0.0.5:2222"}, "ansible_host '10.0.0.5:2222' has a port in it"),
        ({"ansible_host": "[fe80::1]:22"}, "ansible_host '[fe80::1]:22' has a port in it"),
        ({"ansible_host": "https://vc.example.com"}, "ansible_host 'https://vc.example.com' is a URL"),
        ({"ansible_ssh_extra_args": ["-o", "ProxyJump=bastion"]}, "ansible_ssh_extra_args must be one string"),
        ({"ansible_user": ["ops", "root"]}, "ansible_user must be one string, not a list"),
        ({"ansible_ssh_common_args": "-o ProxyCommand='ssh -W %h:%p bastion"}, "a quote is not closed"),
    ],
    ids=[
        "ansible_host list",
        "ansible_port 70000",
        "address with a port",
        "IPv6 address with a port",
        "URL",
        "ssh args as a list",
        "user as a list",
        "unbalanced quote",
    ],
)
def test_connection_variables_that_cannot_connect_are_refused(tmp_path: Path, variables: dict, says: str) -> None:
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gpu01": variables}}})
    refused(check(inv, tmp_path), "host gpu01", says)


# ---------------------------------------------------------------- nonsense values


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        (
            {"node_classes__v100__gpu_count": True},
            "gpuready.node_classes.v100.gpu_count: Input should be a valid integer",
        ),
        ({"node_checks": {"xid_window_hours": float("inf")}}, "gpuready.node_checks.xid_window_hours"),
        ({"node_checks": {"pcie_replays_per_minute": float("inf")}}, "gpuready.node_checks.pcie_replays_per_minute"),
        (
            {"node_checks": {"correctable_errors_per_hour": float("inf")}},
            "gpuready.node_checks.correctable_errors_per_hour",
        ),
        ({"training": {"references": [{"gpus": 1, "target": float("nan")}]}}, "gpuready.training.references.0.target"),
    ],
    ids=["gpu_count true", "xid window .inf", "replay rate .inf", "ECC rate .inf", "reference target .nan"],
)
def test_settings_that_make_a_check_meaningless_are_refused(tmp_path: Path, changes: dict, says: str) -> None:
    # yaml.safe_dump writes inf and nan as YAML's .inf and .nan, as a user would.
    inv = make_inventory(tmp_path, settings=with_settings(**changes))
    assert ".inf" in (text := (inv / "group_vars/all/gpuready.yml").read_text()) or ".nan" in text or "true" in text
    refused(check(inv, tmp_path), says)


@pytest.mark.parametrize(
    ("name", "code_point"),
    [
        ("gpu\u202e10", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("gpu\u200b01", "U+200B (ZERO WIDTH SPACE)"),
        ("gpu\x1bc01", "U+001B (a control character)"),  # ESC c resets a terminal
    ],
    ids=["right-to-left override", "zero-width space", "terminal escape"],
)
def test_host_names_that_show_as_another_name_are_refused(tmp_path: Path, name: str, code_point: str) -> None:
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {name: {"ansible_connection": "local"}}}})
    done = check(inv, tmp_path)
    refused(done, code_point)
    assert name not in done.stderr, "the message must not carry the character itself to the terminal"


@pytest.mark.parametrize("address", ["10.0.0.5", "fe80::1", "2001:db8::5", "gpu01.example.com", "{{ lookup_addr }}"])
def test_addresses_ansible_reaches_are_accepted(tmp_path: Path, address: str) -> None:
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gpu01": {"ansible_host": address}}}})
    done = check(inv, tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_chroot_hosts_path_is_its_address(tmp_path: Path) -> None:
    """A chroot connection's ansible_host is the root's path (the provisioning tests' Debian roots): no network
    address, so not refused as one; the same path on an ssh host is."""
    chroot = {"ansible_connection": "community.general.chroot", "ansible_host": "/srv/roots/gpu01"}
    inv = make_inventory(tmp_path / "chroot", hosts={"gpu_nodes": {"hosts": {"gpu01": chroot}}})
    done = check(inv, tmp_path)
    assert done.returncode == 0, done.stderr
    over_ssh = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_host": "/srv/roots/gpu01"}}}}
    refused(check(make_inventory(tmp_path / "ssh", hosts=over_ssh), tmp_path), "host gpu01", "has a space or a '/'")


def test_a_vcenter_given_as_a_url_is_refused(tmp_path: Path) -> None:
    hosts = {
        "gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}},
        "vcenter": {"hosts": {"vc": {"ansible_host": "https://vc.example.com/sdk"}}},
    }
    refused(check(make_inventory(tmp_path, hosts=hosts), tmp_path), "host vc", "is a URL")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("gpu0\u04301", "mixes letters of several scripts (CYRILLIC, LATIN)"),  # a Cyrillic a
        ("gpu 01", "--limit can never select it"),
        ("all", "the name of Ansible's built-in group"),
    ],
    ids=["look-alike", "space", "all"],
)
def test_host_names_that_cannot_be_told_or_selected_are_refused(tmp_path: Path, name: str, says: str) -> None:
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {name: {"ansible_connection": "local"}}}})
    refused(check(inv, tmp_path), says)


# Ansible reads a vars file without an extension too (DataLoader.find_vars_files).
@pytest.mark.parametrize("name", ["shadow.yml", "shadow"])
def test_a_vars_file_linked_from_outside_the_inventory_is_refused_unless_allowed(tmp_path: Path, name: str) -> None:
    inv = make_inventory(tmp_path)
    outside = tmp_path / "elsewhere"  # stands for /etc/shadow: a file readable as a YAML mapping
    outside.write_text("root:*:20228:0:99999:7:::\n")
    (inv / "group_vars" / "all" / name).symlink_to(outside)
    refused(check(inv, tmp_path), f"group_vars/all/{name}", f"a link to {outside}", "outside the inventory")
    allowed = check(inv, tmp_path, env={"GPUREADY_INVENTORY_LINKS_OUTSIDE": "1"})
    assert allowed.returncode == 0, allowed.stderr


# ---------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("hosts", "says"),
    [
        (
            {"gpu_nodes": {"hosts": {"gpu01": None}, "children": {"rack_a": {"children": {"gpu_nodes": {}}}}}},
            "Adding group 'rack_a' as child to 'gpu_nodes' creates a recursive dependency loop",
        ),
        ({"gpu_nodes": {"hosts": ["gpu01", "gpu02"]}}, 'Invalid "hosts" entry for "gpu_nodes" group'),
    ],
    ids=["group cycle", "hosts as a list"],
)
def test_an_inventory_ansible_cannot_read_is_one_line_with_the_cause(tmp_path: Path, hosts: dict, says: str) -> None:
    inv = make_inventory(tmp_path, hosts=hosts)
    done = check(inv, tmp_path)
    refused(done, "not a valid Ansible inventory", says)
    assert "WARNING" not in done.stderr


def test_a_vars_file_encrypted_whole_says_so_and_opens_with_its_password(
    tmp_path: Path, wrong_password: dict[str, str]
) -> None:
    inv = make_inventory(tmp_path)
    settings = inv / "group_vars" / "all" / "gpuready.yml"
    vault(tmp_path, "encrypt", str(settings))
    assert settings.read_text().startswith("$ANSIBLE_VAULT;")
    refused(check(inv, tmp_path, env=wrong_password), "gpuready.yml", "encrypted with Ansible Vault", "vault id")
    done = check(inv, tmp_path, env={"ANSIBLE_VAULT_PASSWORD_FILE": str(tmp_path / "vault-password")})
    assert done.returncode == 0, done.stderr


def test_group_vars_all_as_a_link_to_a_folder_in_the_inventory_is_read(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path)
    shared = inv / "shared"
    (inv / "group_vars" / "all").rename(shared)
    (inv / "group_vars" / "all").symlink_to(os.path.relpath(shared, inv / "group_vars"))
    done = check(inv, tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_single_yaml_inventory_file_is_accepted_as_ansible_accepts_it(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path)
    site = inv / "site-hosts.yml"
    (inv / "hosts.yml").rename(site)
    done = check(site, tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    groups = next(c for c in summary["checks"] if c["id"] == "inventory.groups")
    assert "gpu_nodes: 1" in groups["message"]


def test_a_home_ansible_cannot_write_to_is_named_not_the_inventory(tmp_path: Path) -> None:
    """HOME under a regular file: no one, root included, can make ~/.ansible/tmp there. Said as what it is
    (could not run, exit 3), with the way out."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    inv = make_inventory(tmp_path)
    done = check(inv, tmp_path, env={"HOME": str(blocker / "home")})
    assert done.returncode == 3, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "Ansible cannot make its folder on this machine" in line and "ANSIBLE_LOCAL_TEMP" in line, line
    assert "not a valid Ansible inventory" not in line


def test_columns_zero_still_shows_the_verdict(tmp_path: Path) -> None:
    """COLUMNS=0 (POSIX leaves a value that is not a positive number unspecified): the verdict at the default
    width, not nothing at all."""
    done = check(make_inventory(tmp_path), tmp_path, env={"COLUMNS": "0"})
    assert done.returncode == 0, done.stderr
    assert "inventory check: PASSED" in done.stdout, done.stdout


def test_a_vault_password_script_that_never_answers_is_given_up(tmp_path: Path) -> None:
    """Ansible waits for a password script forever; gpuready gives it $GPUREADY_CREDENTIAL_TIMEOUT_S, ends it and
    says so (exit 3). The script is left behind by nobody."""
    inv = make_inventory(tmp_path)
    (inv / "group_vars" / "gpu_nodes").mkdir()
    (inv / "group_vars" / "gpu_nodes" / "vault.yml").write_text(
        vault(tmp_path, "encrypt_string", "s3cret-become", "--name", "ansible_become_password")
    )
    script = tmp_path / "hangs.sh"
    script.write_text(f"#!/bin/sh\nexec sleep {3600 + os.getpid() % 1000}\n")
    script.chmod(0o755)
    env = {"ANSIBLE_VAULT_PASSWORD_FILE": str(script), "GPUREADY_CREDENTIAL_TIMEOUT_S": "2"}
    done = check(inv, tmp_path, env=env)
    assert done.returncode == 3, done.stderr
    assert "the vault password script" in done.stderr and "did not answer within 2 s" in done.stderr
    left = subprocess.run(["pgrep", "-f", f"sleep {3600 + os.getpid() % 1000}"], capture_output=True, text=True)
    assert left.stdout == "", "the script was left running"
