"""A real ansible-runner run of site.yml against this machine, asserted from its results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuready.core.runner import TaskEvent, run_playbook
from tests.conftest import ROOT, gpuready, provision_cluster
from tests.playbooks import site, waiting_play
from tests.runner_events import task_of, written_events

pytestmark = pytest.mark.slow

LOCAL = ROOT / "inventories" / "local"


def _summary(runs: Path) -> dict:
    [path] = list(runs.glob("*/summary.json"))
    return json.loads(path.read_text())


def test_provision_check_mode_on_localhost_reports_preflight_and_changes_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = gpuready("provision", "cluster", "-i", str(LOCAL), "--check", "--artifacts", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _summary(runs)
    checks = {c["id"]: c for c in summary["checks"] if c["host"] == "localhost"}
    os_release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    assert os_release["NAME"].strip('"').split()[0] in checks["preflight.os"]["message"]
    assert checks["preflight.os"]["status"] == "passed"
    assert checks["preflight.gpus"]["status"] == "skipped"  # the local node class expects no GPU
    assert checks["preflight.disk"]["status"] == "passed"
    assert checks["provision.apply"]["status"] == "passed"
    assert summary["metrics"]["check_mode"] is True
    assert summary["metrics"]["changed"] == 0
    folder = next(runs.iterdir())
    assert "provision cluster" in (folder / "command.txt").read_text()
    variables = json.loads((folder / "variables.json").read_text())
    assert variables["check"] is True and variables["playbook"] == "site.yml"
    recap = json.loads((folder / "recap.json").read_text())
    assert recap["localhost"]["failures"] == 0 and recap["localhost"]["ok"] > 0
    assert list((folder / "ansible" / "artifacts").glob("*/job_events/*.json"))
    assert (folder / "junit.xml").is_file() and not (folder / "FAILURE").exists()


def test_the_default_relative_artifacts_folder_works_from_any_directory(tmp_path: Path) -> None:
    # The README's first command: no --artifacts, so runs go to ./gpuready-runs relative to the cwd,
    # while ansible-playbook itself runs in the run's own folder.
    done = gpuready("provision", "cluster", "-i", str(LOCAL), "--check", "--tags", "preflight", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _summary(tmp_path / "gpuready-runs")
    assert summary["checks"] and summary["status"] == "passed"


def test_run_playbook_streams_events_and_returns_per_host_results(tmp_path: Path) -> None:
    events: list[TaskEvent] = []
    run = run_playbook("site.yml", LOCAL, tmp_path, check=True, tags=["preflight"], progress=events.append)
    host = run.hosts["localhost"]
    assert host.failures == 0 and not host.unreachable
    assert {c.id for c in host.checks} >= {"preflight.os", "preflight.gpus", "preflight.selinux", "preflight.disk"}
    tasks = [e.task for e in events if e.host == "localhost"]
    assert "Preflight | Find NVIDIA GPUs on the PCI bus, Secure Boot, the kernel headers and nouveau" in tasks
    assert all(e.status in {"ok", "changed", "skipped", "failed", "unreachable"} for e in events)


def test_secrets_in_the_environment_do_not_reach_the_artifacts(tmp_path: Path) -> None:
    secret = "hunter2-very-secret"
    runs = tmp_path / "runs"
    done = provision_cluster(
        LOCAL, runs, "--check", env={"GPUREADY_VCENTER_PASSWORD": secret, "K8S_AUTH_API_KEY": secret}
    )
    assert done.returncode == 0, done.stderr
    for path in runs.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


def test_ctrl_c_cancels_the_run_cleanly_and_reports_what_ran(tmp_path: Path) -> None:
    playbooks = site(tmp_path, waiting_play({"seconds": 60}, title="A play that takes long"))
    runs = tmp_path / "runs"
    env = {**os.environ, "GPUREADY_PLAYBOOKS": str(playbooks)}
    child = subprocess.Popen(
        [sys.executable, "-m", "gpuready.core.cli", "provision", "cluster", "-i", str(LOCAL), "--artifacts", str(runs)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    seen: set[Path] = set()
    while time.monotonic() < deadline:
        if any(task_of(event) == "Slow | Wait" for event in written_events(runs, seen)):
            break
        time.sleep(0.2)
    started = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert time.monotonic() - started < 30, "the cancel took as long as the task"
    assert child.returncode == 130, out + err
    assert "Traceback" not in err
    assert "cancelled by Ctrl-C" in err
    summary = _summary(runs)
    assert summary["status"] == "error"
    assert "cancelled" in summary["aborted"]
