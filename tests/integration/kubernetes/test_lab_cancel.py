"""Ctrl-C during `gpuready lab up --components kubernetes`: the half-started control plane is stopped, no
process of it is left (read from the process table), state.json does not claim it, and `lab down` is clean."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.integration.kubernetes.conftest import lab_up_midway, require_go
from tests.processes import leftovers, new_mark

pytestmark = pytest.mark.slow


def test_ctrl_c_during_start_up_leaves_nothing_running(tmp_path: Path) -> None:
    require_go()
    lab = tmp_path / "lab"
    env = new_mark()  # every process the lab starts inherits it, also in their own sessions
    up = lab_up_midway(lab, env)
    try:
        assert any("kube-apiserver" in p for p in leftovers(env, settle=0))
        assert up.proc.poll() is None, up.stderr
        # What a terminal does on Ctrl-C: SIGINT to the foreground process group.
        os.killpg(up.proc.pid, signal.SIGINT)
        up.proc.wait(timeout=60)
        up.reader.join(5)
        left = leftovers(env, settle=5)
    finally:
        for line in leftovers(env, settle=0):  # a failing run must not leak a control plane
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert left == [], "processes of the half-started control plane were left running"
    assert up.proc.returncode == 130, up.stderr
    errors = [line for line in up.stderr.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1 and "Traceback" not in up.stderr, up.stderr
    state = lab / "state.json"
    assert not state.exists() or "kubernetes" not in json.loads(state.read_text())
    down = gpuready("lab", "down", "--lab-dir", str(lab), env=env, timeout=120)
    assert down.returncode == 0, down.stderr
    status = gpuready("lab", "status", "--lab-dir", str(lab), env=env)
    assert status.returncode == 0 and "nothing is up" in status.stdout, status.stdout + status.stderr
