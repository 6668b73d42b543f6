"""``inventory check`` judges the driver branch as the driver role's plan would: a branch older than the role's
``nvidia_driver_oldest_supported_branch`` fails before anything runs, unless the host accepts one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.conftest import ROOT, gpuready

OLDEST = yaml.safe_load((ROOT / "playbooks/roles/nvidia_driver/defaults/main.yml").read_text())[
    "nvidia_driver_oldest_supported_branch"
]


def _copy(tmp_path: Path, name: str, branch: str) -> Path:
    inv = tmp_path / name
    shutil.copytree(ROOT / "inventories" / name, inv)
    settings = inv / "group_vars/all/gpuready.yml"
    data = yaml.safe_load(settings.read_text())
    data["gpuready"]["driver"]["branch"] = branch
    settings.write_text(yaml.safe_dump(data))
    return inv


def _checks(run: Path) -> dict[str, dict[str, str]]:
    summary = json.loads(next(run.glob("*/summary.json")).read_text())
    return {c["host"]: c for c in summary["checks"] if c["id"] == "inventory.driver_branch"}


def test_every_shipped_example_pins_a_branch_nvidia_supports(tmp_path: Path) -> None:
    for inv in sorted(p for p in (ROOT / "inventories").iterdir() if (p / "hosts.yml").is_file()):
        done = gpuready("inventory", "check", "-i", str(inv), "--artifacts", str(tmp_path / inv.name))
        assert done.returncode == 0, done.stdout + done.stderr
        checks = _checks(tmp_path / inv.name)
        assert all(c["status"] == "passed" for c in checks.values()), checks
    # every example with GPU nodes was judged (the local one expects no GPU)
    assert _checks(tmp_path / "baremetal-c4140").keys() == {"c4140-01", "c4140-02"}


def test_a_retired_branch_fails_every_gpu_host_with_the_remedy(tmp_path: Path) -> None:
    inv = _copy(tmp_path, "baremetal-c4140", "418")
    done = gpuready("inventory", "check", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 1, done.stdout + done.stderr
    checks = _checks(tmp_path / "runs")
    assert {h: c["status"] for h, c in checks.items()} == {"c4140-01": "failed", "c4140-02": "failed"}
    assert checks["c4140-01"]["message"] == (
        f"driver branch 418 has reached its end of life: the oldest NVIDIA supports is {OLDEST}, "
        "and provisioning refuses it"
    )
    assert f"pin {OLDEST} or newer" in checks["c4140-01"]["remedy"]
    assert "nvidia_driver_allow_end_of_life: true" in checks["c4140-01"]["remedy"]
    assert "inventory.driver_branch  failed on 2 hosts: c4140-01, c4140-02" in done.stdout


def test_a_host_that_accepts_a_retired_branch_passes_and_its_mate_does_not(tmp_path: Path) -> None:
    inv = _copy(tmp_path, "baremetal-c4140", f"{OLDEST - 10}-open")
    (inv / "host_vars").mkdir(exist_ok=True)
    (inv / "host_vars/c4140-02.yml").write_text("nvidia_driver_allow_end_of_life: true\n")
    done = gpuready("inventory", "check", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 1, done.stdout + done.stderr
    checks = _checks(tmp_path / "runs")
    assert {h: c["status"] for h, c in checks.items()} == {"c4140-01": "failed", "c4140-02": "passed"}
    assert "accepted (nvidia_driver_allow_end_of_life)" in checks["c4140-02"]["message"]
