"""A run stopped inside a loop -- at a step that timed out on the vCenter host, or by Ctrl-C -- or a loop that failed
on a later item reports the items that had changed before: Ansible reports a loop's change only when every item is
done (and none for a failed loop), so without them a half-applied loop would read as nothing changed. Real Ansible
through the real command line, with a playbook of our own in place of site.yml (GPUREADY_PLAYBOOKS): one item
changes, the next hangs (or fails)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.playbooks import site
from tests.processes import Child, leftovers, new_mark
from tests.runner_events import written_events
from tests.unit.core.test_bad_inputs import GOOD, make_inventory

pytestmark = pytest.mark.slow

TASK = "Loop | Change, then hang"
STEP_TIMEOUT_S = 3
#: Python, Ansible and the 3 s step on a loaded 2-core machine; the hanging item would run for HANG_S.
BOUNDED_S = 60
HANG_S = 300


def _inventory(tmp_path: Path) -> Path:
    hosts = {"vcenter": {"hosts": {"vc": {"ansible_host": "127.0.0.1", "ansible_connection": "local"}}}}
    return make_inventory(tmp_path, hosts=hosts, settings={"gpuready": GOOD})


def _playbooks(tmp_path: Path, timeout: int | None, loop: list[str] | None = None, **task: Any) -> Path:
    """A play on the vCenter host whose one task runs each command of ``loop`` (by default: one that changes, then
    one that hangs), with ``task``'s keywords added; ``timeout``: the play's."""
    play: dict[str, Any] = {
        "name": "Loop | A vCenter play whose second item hangs",
        "hosts": "vcenter",
        "gather_facts": False,
        "tags": ["loop"],
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "tasks": [
            {
                "name": TASK,
                "ansible.builtin.command": "{{ item }}",
                "loop": loop or ["true", f"sleep {HANG_S}"],
                "changed_when": True,
                **task,
            }
        ],
    }
    if timeout:
        play["timeout"] = timeout
    return site(tmp_path, play)


def _run_to_end(tmp_path: Path, playbooks: Path) -> tuple[int, str, dict[str, Any]]:
    """``provision cluster`` of ``playbooks`` run to its end: its exit status, its stderr and its summary.json."""
    runs = tmp_path / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(playbooks), **new_mark()}
    args = ["provision", "cluster", "-i", str(_inventory(tmp_path)), "--tags", "loop", "--artifacts", str(runs)]
    child = Child(args, env)
    child.proc.wait(timeout=120)
    child.reader.join(5)
    return child.proc.returncode, child.stderr, _summary(runs)


def _wait_for_first_item(runs: Path, child: Child) -> None:
    deadline = time.monotonic() + 90
    while True:
        if any(event.get("event") == "runner_item_on_ok" for event in written_events(runs)):
            return
        assert child.proc.poll() is None and time.monotonic() < deadline, child.stderr
        time.sleep(0.05)


def _summary(runs: Path) -> dict[str, Any]:
    [path] = list(runs.glob("*/summary.json"))
    return dict(json.loads(path.read_text()))


def test_a_step_that_times_out_mid_loop_reports_the_items_changed_before(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(_playbooks(tmp_path, STEP_TIMEOUT_S)), **new_mark()}
    args = ["provision", "cluster", "-i", str(_inventory(tmp_path)), "--tags", "loop", "--artifacts", str(runs)]
    started = time.monotonic()
    child = Child(args, env)
    try:
        child.proc.wait(timeout=HANG_S)
    finally:
        if child.proc.poll() is None:
            child.signal_and_wait(signal.SIGKILL, limit=60)
    took = time.monotonic() - started
    child.reader.join(5)
    assert leftovers(env) == [], "the hanging item's command was left running"
    assert child.proc.returncode == 3, child.stderr
    errors = [line for line in child.stderr.splitlines() if line.startswith("gpuready: error:")]
    assert errors == [
        f"gpuready: error: vCenter 127.0.0.1:443 stopped answering during {TASK!r}: no answer within "
        f"{STEP_TIMEOUT_S}s (gpuready.vsphere.step_timeout_s); 1 change(s) applied before it stopped are in the "
        "results"
    ], child.stderr
    assert took < BOUNDED_S, took
    summary = _summary(runs)
    assert summary["metrics"]["changed"] == 1, summary["metrics"]
    [reach] = [c for c in summary["checks"] if c["id"] == "provision.reach"]
    assert reach["host"] == "vc" and reach["status"] == "error", reach
    assert reach["message"].endswith(f"1 changed so far: {TASK} (true)"), reach
    assert reach["evidence"] == f"{TASK} (true)", reach


def test_a_cancel_mid_loop_reports_the_items_changed_before(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(_playbooks(tmp_path, None)), **new_mark()}
    args = ["provision", "cluster", "-i", str(_inventory(tmp_path)), "--tags", "loop", "--artifacts", str(runs)]
    child = Child(args, env)
    try:
        _wait_for_first_item(runs, child)
        child.signal_and_wait(signal.SIGINT, limit=15)
    finally:
        if child.proc.poll() is None:
            child.signal_and_wait(signal.SIGKILL, limit=60)
    assert leftovers(env) == [], "the hanging item's command was left running"
    assert child.proc.returncode == 130, child.stderr
    summary = _summary(runs)
    assert summary["metrics"]["changed"] == 1, summary["metrics"]
    [apply] = [c for c in summary["checks"] if c["id"] == "provision.apply"]
    assert apply["host"] == "vc" and apply["status"] == "error", apply
    assert apply["message"] == f"cancelled before the playbook finished: 0 ok, 1 changed so far: {TASK} (true)", apply
    assert apply["evidence"] == f"{TASK} (true)", apply


def test_a_loop_that_fails_on_a_later_item_reports_the_items_changed_before(tmp_path: Path) -> None:
    # Ansible's recap counts no change for a failed task, though its items before the failure were applied.
    # Ansible runs every item of a loop, also those after a failed one.
    loop = ["true first", "false second", "true third", "false fourth"]
    returncode, stderr, summary = _run_to_end(tmp_path, _playbooks(tmp_path, None, loop))
    assert returncode == 1, stderr
    assert summary["metrics"]["changed"] == 1, summary["metrics"]
    [apply] = [c for c in summary["checks"] if c["id"] == "provision.apply"]
    assert apply["host"] == "vc" and apply["status"] == "failed", apply
    assert apply["message"] == (
        f"{TASK}: item false second: non-zero return code (+1 more failed items); "
        f"0 ok, 1 changed so far: {TASK} (true first, true third)"
    ), apply
    assert apply["evidence"].splitlines()[-1] == f"changed: {TASK} (true first, true third)", apply


def test_a_failed_loop_whose_errors_are_ignored_counts_its_change_once(tmp_path: Path) -> None:
    # Ansible's recap counts the change of a task whose failure is ignored: the items are not counted again.
    playbooks = _playbooks(tmp_path, None, ["true first", "false second"], ignore_errors=True)
    returncode, stderr, summary = _run_to_end(tmp_path, playbooks)
    assert returncode == 0, stderr
    assert summary["metrics"]["changed"] == 1, summary["metrics"]
    [apply] = [c for c in summary["checks"] if c["id"] == "provision.apply"]
    assert (apply["status"], apply["message"], apply["evidence"]) == ("passed", "1 ok, 1 changed", TASK), apply
