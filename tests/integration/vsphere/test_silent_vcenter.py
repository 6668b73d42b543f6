"""A vCenter that accepts the connection and never answers (vcsim stopped with SIGSTOP): one line and exit 3
within the request timeout, from `validate vsphere` and from `provision cluster --tags vsphere --check`; and one
that stops answering in the middle of a real apply, after a change was made: the run ends within the step bound
(gpuready.vsphere.step_timeout_s), or at a Ctrl-C, with the change it made reported and nothing of it running."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpuready
from tests.integration.vsphere.conftest import Vcsim, start_vcsim
from tests.processes import Child, leftovers, new_mark
from tests.runner_events import written_events

pytestmark = pytest.mark.slow
TIMEOUT_S = 3
#: A vCenter with no timeout hangs until gpuready() gives up on it here.
HANG_S = 120
#: Python, Ansible's inventory and the 3 s timeout took 12-15 s at a load average of 9 on 2 cores: this bound leaves
#: a machine six times slower room, and a hang, which runs into HANG_S, none.
BOUNDED_S = 90


@pytest.fixture
def stopped_vcsim(vcsim_binary: Path, tmp_path: Path) -> Iterator[Vcsim]:
    """vcsim, up and listening, then stopped: the kernel still accepts connections on its socket."""
    for vcsim in start_vcsim(vcsim_binary, tmp_path / "vcsim"):
        vcsim.connect()  # it answers before it is stopped
        os.kill(vcsim.pid, signal.SIGSTOP)
        try:
            yield vcsim
        finally:
            os.kill(vcsim.pid, signal.SIGCONT)


@pytest.mark.parametrize(
    "command",
    [["validate", "vsphere"], ["provision", "cluster", "--tags", "vsphere", "--check"]],
    ids=["validate", "provision-check"],
)
def test_a_silent_vcenter_is_one_line_and_exit_3_in_bounded_time(
    command: list[str], stopped_vcsim: Vcsim, env: dict[str, str], tmp_path: Path
) -> None:
    inventory = stopped_vcsim.inventory(request_timeout_s=TIMEOUT_S)
    started = time.monotonic()
    done = gpuready(*command, "-i", str(inventory), "--artifacts", str(tmp_path / "runs"), env=env, timeout=HANG_S)
    took = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0] == (
        f"gpuready: error: vCenter 127.0.0.1:{stopped_vcsim.port} accepted the connection but did not answer "
        f"within {TIMEOUT_S}s (gpuready.vsphere.request_timeout_s)"
    )
    # The timeout, plus starting Python and Ansible's inventory: far from the minutes it hung before.
    assert took < BOUNDED_S, took


#: The apply's step bound in these tests (gpuready.vsphere.step_timeout_s): the steps before vcsim stops take a
#: second or two; small, so the test is quick.
STEP_TIMEOUT_S = 10
#: The step bound, then stopping the run (2 s) and writing the results, on a loaded 2-core machine; a run left to
#: hang runs into HANG_S instead.
STEP_BOUNDED_S = STEP_TIMEOUT_S + 50


@pytest.fixture
def vcsim_to_stop(vcsim_binary: Path, tmp_path: Path) -> Iterator[Vcsim]:
    """vcsim of its own, for one test to stop mid-apply; continued in teardown so it can be terminated."""
    for vcsim in start_vcsim(vcsim_binary, tmp_path / "vcsim"):
        try:
            yield vcsim
        finally:
            os.kill(vcsim.pid, signal.SIGCONT)


def first_change(runs: Path, child: Child, timeout: float = 240) -> str:
    """The task of the run's first applied change, read from ansible-runner's events as they are written."""
    seen: set[Path] = set()
    deadline = time.monotonic() + timeout
    while True:
        for event in written_events(runs, seen):
            data = event.get("event_data", {})
            if event.get("event") == "runner_on_ok" and (data.get("res") or {}).get("changed"):
                return str(data["task"])
        assert child.proc.poll() is None, f"the run ended before any change: {child.stderr}"
        assert time.monotonic() < deadline, f"no change applied within {timeout}s: {child.stderr}"
        time.sleep(0.02)


def _summary(runs: Path) -> dict[str, Any]:
    [path] = list(runs.glob("*/summary.json"))
    return dict(json.loads(path.read_text()))


def test_a_vcenter_that_stops_answering_mid_apply_ends_the_run_within_the_step_bound(
    vcsim_to_stop: Vcsim, env: dict[str, str], tmp_path: Path
) -> None:
    inventory = vcsim_to_stop.inventory(step_timeout_s=STEP_TIMEOUT_S)
    runs = tmp_path / "runs"
    mark = {**env, **new_mark()}
    child = Child(["provision", "cluster", "-i", str(inventory), "--tags", "vsphere", "--artifacts", str(runs)], mark)
    try:
        changed_task = first_change(runs, child)
        os.kill(vcsim_to_stop.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        child.proc.wait(timeout=HANG_S)
        took = time.monotonic() - stopped
    finally:
        if child.proc.poll() is None:
            os.killpg(child.proc.pid, signal.SIGKILL)
    child.reader.join(5)
    assert leftovers(mark) == [], "processes of the run left behind"
    assert child.proc.returncode == 3, child.stderr
    assert "Traceback" not in child.stderr
    errors = [line for line in child.stderr.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1, child.stderr
    assert errors[0].startswith(
        f"gpuready: error: vCenter 127.0.0.1:{vcsim_to_stop.port} stopped answering during '"
    ), errors[0]
    assert f"no answer within {STEP_TIMEOUT_S}s (gpuready.vsphere.step_timeout_s)" in errors[0], errors[0]
    assert "change(s) applied before it stopped" in errors[0], errors[0]
    assert took < STEP_BOUNDED_S, took
    summary = _summary(runs)
    assert summary["metrics"]["changed"] >= 1, summary["metrics"]
    [reach] = [c for c in summary["checks"] if c["id"] == "provision.reach"]
    assert reach["host"] == "vcsim" and reach["status"] == "error", reach
    assert f"got no answer within {STEP_TIMEOUT_S}s" in reach["message"], reach
    assert changed_task in reach["message"] and changed_task in reach["evidence"].splitlines(), reach
    assert "0 changed" not in reach["message"], reach


def test_a_cancel_mid_apply_reports_the_changes_already_applied(
    vcsim_to_stop: Vcsim, env: dict[str, str], tmp_path: Path
) -> None:
    inventory = vcsim_to_stop.inventory()  # the default step bound: only the cancel ends this run
    runs = tmp_path / "runs"
    mark = {**env, **new_mark()}
    child = Child(["provision", "cluster", "-i", str(inventory), "--tags", "vsphere", "--artifacts", str(runs)], mark)
    try:
        changed_task = first_change(runs, child)
        os.kill(vcsim_to_stop.pid, signal.SIGSTOP)  # the next step hangs: the cancel comes mid-apply
        time.sleep(1)
        child.signal_and_wait(signal.SIGINT, limit=15)
    finally:
        if child.proc.poll() is None:
            os.killpg(child.proc.pid, signal.SIGKILL)
    assert leftovers(mark) == [], "processes of the run left behind"
    assert child.proc.returncode == 130, child.stderr
    assert "Traceback" not in child.stderr
    summary = _summary(runs)
    assert summary["metrics"]["changed"] >= 1, summary["metrics"]
    [apply] = [c for c in summary["checks"] if c["id"] == "provision.apply" and c["host"] == "vcsim"]
    assert apply["status"] == "error" and apply["message"].startswith("cancelled before the playbook finished"), apply
    assert changed_task in apply["message"] and changed_task in apply["evidence"].splitlines(), apply
    assert "0 changed" not in apply["message"], apply
