"""`gpuready lab down` stops every process of the Kubernetes lab, also those of a `lab up` that was killed
before it could write its state, and a second `lab up` does not start over them."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.conftest import gpuready
from tests.integration.kubernetes.conftest import lab_up_midway, require_go
from tests.processes import leftovers, new_mark

pytestmark = pytest.mark.slow


def test_down_after_a_killed_up_stops_everything_it_started(tmp_path: Path) -> None:
    require_go()
    lab = tmp_path / "lab"
    env = new_mark()  # every process the lab starts inherits it
    up = lab_up_midway(lab, env)
    try:
        # Killed now, `lab up` writes no state.
        running = leftovers(env, settle=0)
        assert any("kube-apiserver" in p for p in running), running
    finally:
        os.killpg(up.proc.pid, signal.SIGKILL)
        up.proc.wait(timeout=30)
    assert not (lab / "state.json").exists() or "kubernetes" not in (lab / "state.json").read_text()
    try:
        again = gpuready("lab", "up", "--components", "kubernetes", "--lab-dir", str(lab), env=env, timeout=120)
        assert again.returncode == 3, again.stderr
        message = again.stderr.strip().splitlines()
        assert len(message) == 1 and "gpuready lab down" in message[0], again.stderr
        assert "still run" in message[0]
    finally:
        down = gpuready("lab", "down", "--lab-dir", str(lab), env=env, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "left by an unfinished `lab up`" in down.stderr
    assert leftovers(env, settle=5) == []


def test_down_stops_the_api_server_before_etcd(tmp_path: Path) -> None:
    # Stopped after etcd, kube-apiserver keeps retrying etcd and ignores SIGTERM (it then needs SIGKILL).
    require_go()
    lab = tmp_path / "lab"
    env = new_mark()
    up = gpuready("lab", "up", "--components", "kubernetes", "--lab-dir", str(lab), env=env, timeout=3600)
    try:
        assert up.returncode == 0, up.stderr
    finally:
        down = gpuready("lab", "down", "--lab-dir", str(lab), env=env, timeout=120)
    assert down.returncode == 0, down.stderr
    assert leftovers(env, settle=5) == []
    # it says what it stops before it does, and when it is done
    stopping, stopped = down.stderr.strip().splitlines()
    assert stopping.startswith("kubernetes: stopping ")
    assert all(name in stopping for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kwok"))
    assert "gpuready.lab.kube_devices" in stopping  # a `python -m` program by its module
    assert re.fullmatch(r"kubernetes: stopped in \d+\.\ds", stopped), stopped
    logs = lab / "kubernetes" / "logs"
    api_last = _time_of_day(logs / "kube-apiserver.log")
    etcd_signal = _time_of_day(logs / "etcd.log", "received signal")
    # The API server was done (its last log line) before etcd got its SIGTERM.
    assert api_last < etcd_signal, (api_last, etcd_signal)


def _time_of_day(log: Path, containing: str = "") -> str:
    """HH:MM:SS.ffffff of the last line (containing ``containing``) of a klog or etcd (JSON) log."""
    import json
    import re

    lines = [line for line in log.read_text().splitlines() if containing in line]
    if log.suffix == ".log" and lines and lines[-1].startswith("{"):
        return str(json.loads(lines[-1])["ts"]).split("T")[1].rstrip("Z")
    times = [m.group(1) for line in lines if (m := re.match(r"[IWEF]\d{4} (\d\d:\d\d:\d\d\.\d{6})", line))]
    assert times, f"no klog line in {log}"
    return times[-1]
