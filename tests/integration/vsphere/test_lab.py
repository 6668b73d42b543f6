"""`gpuready lab up --components vsphere`: vcsim as a lab component, its inventory usable as is."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.lab_hints import run_hints

pytestmark = pytest.mark.slow


def test_lab_up_validate_down(vcsim_binary: Path, tmp_path: Path, artifacts: Path) -> None:
    from gpuready.lab import pid_alive

    lab = tmp_path / "lab"
    up = gpuready("lab", "up", "--components", "vsphere", "--lab-dir", str(lab))
    try:
        assert up.returncode == 0, up.stderr
        inventory = Path(up.stdout.strip().splitlines()[-1])
        assert inventory == lab / "vsphere" / "inventory"
        password_file = lab / "vsphere" / "password"
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        password = password_file.read_text()
        assert password not in "".join(p.read_text() for p in inventory.rglob("*.yml"))

        # TLS is verified in the lab too: the inventory trusts the lab's own certificate.
        env = {"GPUREADY_VCENTER_PASSWORD": password}
        done = gpuready("validate", "vsphere", "-i", str(inventory), "--artifacts", str(artifacts), env=env)
        assert done.returncode == 1, done.stdout + done.stderr  # a fresh lab is not provisioned
        assert "ATS is off" in done.stdout

        status = gpuready("lab", "status", "--lab-dir", str(lab))
        assert "running" in status.stdout + status.stderr
    finally:
        state = (lab / "state.json").read_text() if (lab / "state.json").exists() else "{}"
        down = gpuready("lab", "down", "--lab-dir", str(lab))
    assert down.returncode == 0, down.stderr
    pids = json.loads(state).get("vsphere", {}).get("pids", [])
    assert pids and not any(pid_alive(int(p)) for p in pids)


def test_readme_walkthrough_with_relative_paths(vcsim_binary: Path, tmp_path: Path) -> None:
    """The README's lab walkthrough as written: a relative lab folder, so a relative ``-i``, and the lab's CA
    file given relative to the inventory. The plan and Ansible's vSphere modules both find the CA, from the
    folder the lab was made in and from another one."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    up = gpuready("lab", "up", "--components", "vsphere", "--lab-dir", "gpuready-lab", cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        assert Path(up.stdout.strip().splitlines()[-1]) == tmp_path / "gpuready-lab/vsphere/inventory"
        settings = (tmp_path / "gpuready-lab/vsphere/inventory/group_vars/all/gpuready.yml").read_text()
        assert "ca_file: ../" in settings  # relative to the inventory, as a user would write it
        env = {"GPUREADY_VCENTER_PASSWORD": (tmp_path / "gpuready-lab/vsphere/password").read_text()}
        for cwd, inventory in (
            (tmp_path, "gpuready-lab/vsphere/inventory"),
            (elsewhere, "../gpuready-lab/vsphere/inventory"),
        ):
            check = gpuready(
                "provision",
                "cluster",
                "-i",
                inventory,
                "--tags",
                "vsphere",
                "--check",
                "--artifacts",
                "runs",
                env=env,
                cwd=cwd,
            )
            assert check.returncode == 0, f"from {cwd}: {check.stdout}{check.stderr}"
            assert "No such file" not in check.stdout + check.stderr
            changed = json.loads(max((cwd / "runs").glob("*/summary.json")).read_text())["metrics"]["changed"]
            assert changed > 0  # Ansible's modules reached vcsim over verified TLS and planned the changes
            validate = gpuready("validate", "vsphere", "-i", inventory, "--artifacts", "runs", env=env, cwd=cwd)
            assert validate.returncode == 1, validate.stdout + validate.stderr  # findings, not "cannot reach"
            assert "ATS is off" in validate.stdout
    finally:
        down = gpuready("lab", "down", "--lab-dir", "gpuready-lab", cwd=tmp_path)
    assert down.returncode == 0, down.stderr


def test_every_hint_lab_up_prints_runs_as_printed(vcsim_binary: Path, tmp_path: Path) -> None:
    up = gpuready("lab", "up", "--components", "vsphere", cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        ran = run_hints(up.stderr, tmp_path)
        assert [line.split(" -i ")[0] for line, _ in ran] == [
            "gpuready provision cluster",
            "gpuready provision cluster",
            "gpuready validate vsphere",
        ]
        for line, done in ran:
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    finally:
        down = gpuready("lab", "down", cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    [validated] = tmp_path.glob("gpuready-runs/*validate-vsphere/summary.json")
    assert {c["status"] for c in json.loads(validated.read_text())["checks"]} <= {"passed", "skipped"}
