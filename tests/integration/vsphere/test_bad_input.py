"""Bad input and unreachable vCenters against vcsim: one line each, the right exit code, no
traceback, and nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready
from tests.doc_samples import blocks, owned_block
from tests.integration.vsphere.conftest import Vcsim

pytestmark = pytest.mark.slow
PAIR = ["0000:17:00.0", "0000:31:00.0"]
DOCS = ROOT / "docs" / "vsphere.md"
#: The refusals docs/vsphere.md shows, each as ``LINE      (exit CODE)``: the cases that expect these.
SHOWN = (
    "splits the NVLink pair 0000:17:00.0 + 0000:31:00.0",
    "wrong user or password",
    "TLS certificate does not verify",
    "cannot reach vCenter",
)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("gpuready: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def summary(artifacts: Path) -> list[dict[str, str]]:
    """The run's checks from summary.json: the terminal table wraps its cells, the file does not."""
    (path,) = artifacts.glob("*/summary.json")
    return json.loads(path.read_text())["checks"]


def findings(artifacts: Path, status: str) -> str:
    return "\n".join(
        " ".join((c["id"], c["message"], c["evidence"], c["remedy"]))
        for c in summary(artifacts)
        if c["status"] == status
    )


def vms(*entries: tuple[str, str, list[str]]) -> list[dict[str, object]]:
    return [{"name": n, "esxi_host": h, "gpus": g} for n, h, g in entries]


@pytest.mark.parametrize(
    ("command", "inventory", "env_change", "code", "expected"),
    [
        ("validate", {}, {"GPUREADY_VCENTER_PASSWORD": "wrong-password"}, 3, "wrong user or password"),
        ("provision", {}, {"GPUREADY_VCENTER_PASSWORD": "wrong-password"}, 3, "wrong user or password"),
        ("validate", {}, {"GPUREADY_VCENTER_PASSWORD": ""}, 2, "export GPUREADY_VCENTER_PASSWORD"),
        ("validate", {"ca_file": ""}, {}, 3, "TLS certificate does not verify"),
        ("validate", {"unreachable": True}, {}, 3, "cannot reach vCenter"),
        (
            "validate",
            {"gpu_vms": vms(("no-such-vm", "DC0_H0", PAIR))},
            {},
            2,
            "VM 'no-such-vm' is not known to vCenter",
        ),
        ("provision", {"gpu_vms": vms(("no-such-vm", "DC0_H0", PAIR))}, {}, 2, "VM 'no-such-vm' is not known"),
        (
            "validate",
            {"extra_hosts": ("DC0_H9",), "gpu_vms": vms(("DC0_H0_VM0", "DC0_H9", PAIR[:1]))},
            {},
            2,
            "ESXi host 'DC0_H9' is not known to vCenter",
        ),
        ("validate", {"gpu_vms": vms(("DC0_H0_VM0", "DC0_H1", PAIR[:1]))}, {}, 2, "the VM is on ESXi host DC0_H0"),
        (
            "provision",
            {"gpu_vms": vms(("DC0_H0_VM0", "DC0_H0", ["0000:17:00.0", "0000:b1:00.0"]))},
            {},
            2,
            "splits the NVLink pair 0000:17:00.0 + 0000:31:00.0",
        ),
        (
            "provision",
            {"gpu_vms": vms(("DC0_H0_VM0", "DC0_H0", PAIR), ("DC0_H0_VM1", "DC0_H0", PAIR[1:]))},
            {},
            2,
            "GPU 0000:31:00.0 on DC0_H0 is already attached to VM DC0_H0_VM0",
        ),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    vcsim: Vcsim,
    env: dict[str, str],
    artifacts: Path,
    command: str,
    inventory: dict[str, object],
    env_change: dict[str, str],
    code: int,
    expected: str,
) -> None:
    from gpuready.lab.vsphere import free_port

    options = dict(inventory)
    port = free_port() if options.pop("unreachable", False) else None
    path = str(vcsim.inventory(port=port, **options))  # type: ignore[arg-type]
    args = ["validate", "vsphere"] if command == "validate" else ["provision", "cluster", "--tags", "vsphere"]
    done = gpuready(*args, "-i", path, "--artifacts", str(artifacts), env={**env, **env_change})
    assert done.returncode == code, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert expected in line
    assert vcsim.ats() == {"DC0_H0": False, "DC0_H1": False}
    if expected in SHOWN:
        owned_block(DOCS).assert_shows(f"{line}      (exit {code})")


def test_the_docs_show_one_line_for_each_refusal_the_cases_compare() -> None:
    [block] = [b for b in blocks(DOCS) if b.owner.endswith("::test_bad_input_is_one_line_and_changes_nothing")]
    assert len(block.lines) == len(SHOWN), block.body
    for expected in SHOWN:
        assert sum(expected in line for line in block.lines) == 1, (expected, block.body)


def test_insecure_skips_verification_only_when_asked(vcsim: Vcsim, env: dict[str, str], artifacts: Path) -> None:
    path = str(vcsim.inventory(ca_file=""))
    done = gpuready("validate", "vsphere", "-i", path, "--insecure", "--artifacts", str(artifacts), env=env)
    assert done.returncode == 1, done.stdout + done.stderr  # reached vCenter; the site is not provisioned yet
    assert "ATS is off" in findings(artifacts, "failed")


def test_without_the_password_provision_leaves_the_plan_to_ansible(
    vcsim: Vcsim, env: dict[str, str], artifacts: Path
) -> None:
    # vcenter_password may come from Ansible Vault, which only Ansible opens; without either, the
    # play's first task fails saying where the password goes, and nothing changes.
    path = str(vcsim.inventory())
    done = gpuready(
        "provision",
        "cluster",
        "-i",
        path,
        "--tags",
        "vsphere",
        "--artifacts",
        str(artifacts),
        env={**env, "GPUREADY_VCENTER_PASSWORD": ""},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Ansible Vault" in findings(artifacts, "failed") + findings(artifacts, "error")
    assert "Traceback" not in done.stdout + done.stderr
    assert vcsim.ats() == {"DC0_H0": False, "DC0_H1": False}
