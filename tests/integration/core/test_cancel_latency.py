"""How long a cancel takes: the documented bound (docs/reliability.md, "Ctrl-C and SIGTERM") on a real run, and
the mechanism that keeps it there, checked without a stopwatch.

The slow case was ``provision cluster``: ansible-runner looks at its cancel callback only after its child printed
something or after 5 s of silence (its pexpect_timeout), and a play waiting on a host prints nothing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from gpuready.core import cancel
from tests.conftest import ROOT
from tests.processes import Child, leftovers, new_mark

pytestmark = pytest.mark.slow

LOCAL = ROOT / "inventories" / "local"
#: docs/reliability.md: "it returns within two seconds of the signal".
DOCUMENTED_BOUND_S = 2.0
#: Added for a loaded machine: at a load average of 15-18 on 2 cores, 15 of 16 cancels took 0.31-0.52 s and one
#: 1.98 s (BENCHMARKS.md, "Cancel latency"). The mechanism test below is the exact one.
LOADED_MACHINE_MARGIN_S = 1.0


def quiet_play(tmp: Path) -> Path:
    """A play that prints its task's start and then nothing for 30 minutes (a host that never answers)."""
    playbooks = tmp / "playbooks"
    playbooks.mkdir()
    tasks = [
        {"name": "Quiet | First task", "ansible.builtin.debug": {"msg": "first"}},
        {"name": "Quiet | Wait", "ansible.builtin.pause": {"minutes": 30}},
    ]
    play = {"name": "Quiet | A play that waits", "hosts": "gpu_nodes", "gather_facts": False, "tasks": tasks}
    (playbooks / "site.yml").write_text(yaml.safe_dump([play]))
    return playbooks


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_provision_cancel_returns_within_the_documented_bound(sig: int, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(quiet_play(tmp_path)), **new_mark()}
    child = Child(["provision", "cluster", "-i", str(LOCAL), "--artifacts", str(runs)], env)
    deadline = time.monotonic() + 120
    while not any("Quiet | Wait" in p.read_text() for p in runs.glob("*/ansible/artifacts/*/job_events/*.json")):
        assert time.monotonic() < deadline and child.proc.poll() is None, child.stderr
        time.sleep(0.05)
    # Before, the runner noticed a request at its next look, up to 5 s later, whatever the moment of the signal
    # (0.97-5.10 s in BENCHMARKS.md), so a regression fails this test often, and
    # test_a_signal_inside_a_polled_section_ends_the_children_at_once every time.
    took = child.signal_and_wait(sig, limit=DOCUMENTED_BOUND_S + LOADED_MACHINE_MARGIN_S)
    assert child.proc.returncode == 128 + sig, child.stderr
    assert leftovers(env) == [], "processes of the run left behind"
    print(f"cancel took {took:.2f}s")  # shown with -s: the figure BENCHMARKS.md records


POLLED_CHILD = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from gpuready.core import cancel

    with cancel.handling_signals(), cancel.polled():
        child = subprocess.Popen(["sleep", "30"], start_new_session=True)
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
        ended = child.poll() is not None or child.wait(timeout={grace}) is not None
        print("requested" if cancel.requested() else "not requested", "ended" if ended else "running")
    """
)


def test_a_signal_inside_a_polled_section_ends_the_children_at_once() -> None:
    """The mechanism: a poller blocked on its child (ansible-runner on ansible-playbook) is not left waiting for
    its next look; the handler ends the children within the kill grace, and the request stays for the poller."""
    assert cancel.GRACE_S + 0.5 <= DOCUMENTED_BOUND_S  # the grace, plus writing the results, fits the bound
    done = subprocess.run(
        [sys.executable, "-c", POLLED_CHILD.format(grace=cancel.GRACE_S)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["requested", "ended"], done.stdout + done.stderr
