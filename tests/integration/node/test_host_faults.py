"""Hosts that go wrong in the middle of `validate gpu-node`, over real SSH to namespace hosts.

A host whose sshd dies mid-run is an error for that host while the others complete; Ctrl-C with
a host whose commands hang returns at once, writes the finished hosts, and leaves no process behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ModuleTmp
from tests.integration.node.conftest import start
from tests.processes import Child, leftovers, new_mark

pytestmark = [pytest.mark.root, pytest.mark.slow]

PROFILES = ["a100-x4", "h100-x8", "v100-x4"]


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    yield from start(module_tmp("faults"), PROFILES)


def _smi(lab: dict[str, Any], index: int) -> Path:
    return Path(lab["key"]).parents[1] / "hosts" / lab["hosts"][index]["name"] / "bin" / "nvidia-smi"


@contextmanager
def stalled(lab: dict[str, Any], index: int) -> Iterator[dict[str, Any]]:
    """One host's nvidia-smi hangs (as with a GPU fallen off the bus): its batch of commands never returns."""
    path = _smi(lab, index)
    original = path.read_text()
    path.write_text(original.replace("\n", "\nsleep 600\n", 1))
    try:
        yield lab["hosts"][index]
    finally:
        path.write_text(original)


@contextmanager
def as_root_too(lab: dict[str, Any], index: int, on: bool = True) -> Iterator[None]:
    """The host's nvidia-smi also found by sudo, whose secure_path (Debian's /etc/sudoers) drops the lab's PATH:
    a tmpfs on /usr/local/sbin, the first folder of that path, in the host's own mount namespace only, holding it."""
    if not on:
        yield
        return
    sbin, smi = "/usr/local/sbin", _smi(lab, index)
    # the host's PID namespace too, whose /proc its mount namespace shows (umount reads /proc/self/mountinfo)
    pid = lab["hosts"][index]["pid"]
    enter = ["nsenter", "-t", str(pid), "-m", f"--pid=/proc/{pid}/ns/pid_for_children", "--"]
    subprocess.run([*enter, "mount", "-t", "tmpfs", "tmpfs", sbin], check=True)
    try:
        subprocess.run([*enter, "ln", "-s", str(smi), f"{sbin}/nvidia-smi"], check=True)
        yield
    finally:
        subprocess.run([*enter, "umount", "-l", sbin], check=True)


def _wait_for_hung_command(env: dict[str, str], child: Child, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any("ssh" in p for p in leftovers(env, settle=0)):
        assert time.monotonic() < deadline and child.proc.poll() is None, child.stderr
        time.sleep(0.1)


def _others_done(lab: dict[str, Any], artifacts: Path) -> tuple[dict[str, str], Child]:
    """validate gpu-node running: every host but the stalled first one finished, its command hanging."""
    env = new_mark()
    child = Child(["validate", "gpu-node", "-i", str(lab["inventory"]), "--artifacts", str(artifacts)], env)
    for other in lab["hosts"][1:]:
        child.wait_for(f"{other['name']}: ")
    _wait_for_hung_command(env, child)
    return env, child


def on_node(host: dict[str, Any], settle: float = 10.0) -> list[str]:
    """What still runs on the host besides its sshd listener after ``settle`` seconds: the processes in its network
    namespace (pid and command line). The hung command's processes do not carry the run's mark (sshd starts them)."""
    deadline = time.monotonic() + settle
    while True:
        listed = subprocess.run(["ip", "netns", "pids", host["namespace"]], capture_output=True, text=True, check=True)
        found = []
        for pid in listed.stdout.split():
            if int(pid) == host["pid"]:
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_bytes()
                state, parent = stat[stat.rfind(b")") + 2 :].split()[:2]
                # zombies, and the sshd listener: the host's PID 1, whose parent is the host's unshare
                if state == b"Z" or int(parent) == host["pid"]:
                    continue
                found.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _summary(artifacts: Path) -> dict[str, list[dict[str, Any]]]:
    summary = json.loads(next(artifacts.glob("*/summary.json")).read_text())
    by_host: dict[str, list[dict[str, Any]]] = {}
    for check in summary["checks"]:
        by_host.setdefault(check["host"], []).append(check)
    return by_host


def test_ctrl_c_with_a_hung_host_returns_at_once_and_writes_the_others(lab: dict[str, Any], tmp_path: Path) -> None:
    with stalled(lab, 0) as host:
        env, child = _others_done(lab, tmp_path)
        child.signal_and_wait(signal.SIGINT, limit=3)
    assert leftovers(env) == [], "processes of the run left behind"
    assert child.proc.returncode == 130, child.stderr
    by_host = _summary(tmp_path)
    [hung] = by_host[host["name"]]
    assert hung["status"] == "error" and "cancelled" in hung["message"]
    for other in lab["hosts"][1:]:
        assert len(by_host[other["name"]]) > 10


@pytest.mark.parametrize(("sig", "become"), [(signal.SIGINT, False), (signal.SIGTERM, True)])
def test_a_cancel_ends_the_hung_command_on_the_node(
    lab: dict[str, Any], tmp_path: Path, sig: int, become: bool
) -> None:
    # Without a terminal sshd sends the command no SIGHUP when the connection drops: the node's watchdog, reading
    # the batch's standard input, stops it (also through sudo, with ansible_become).
    inventory = lab["inventory"]
    if become:
        inventory = tmp_path / "inventory"
        shutil.copytree(lab["inventory"], inventory)
        hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
        hosts["gpu_nodes"]["hosts"][lab["hosts"][0]["name"]].update(ansible_become=True, ansible_become_user="root")
        (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    with stalled(lab, 0) as host, as_root_too(lab, 0, become):
        env, child = _others_done({**lab, "inventory": inventory}, tmp_path / "runs")
        hung = on_node(host, settle=0)
        assert any("sleep 600" in p for p in hung), hung
        if become:
            assert any(p.split(": ", 1)[1].startswith("sudo ") for p in hung), hung
        child.signal_and_wait(sig, limit=3)
        assert on_node(host) == []
    assert leftovers(env) == [], "processes of the run left behind"
    assert child.proc.returncode == 128 + sig, child.stderr


def test_a_hung_host_is_given_up_at_its_deadline_and_the_others_measure(lab: dict[str, Any], tmp_path: Path) -> None:
    # The fixed commands stop on the node at --host-timeout less 5 s; the host is then an error alone, and its
    # session ends (nothing of the run is left). The others' measuring commands ran on their one connection.
    with stalled(lab, 0) as host:
        env = new_mark()
        started = time.monotonic()
        child = Child(
            ["validate", "gpu-node", "-i", str(lab["inventory"]), "--artifacts", str(tmp_path), "--host-timeout", "12"],
            env,
        )
        child.proc.wait(timeout=120)
        child.reader.join(5)
        took = time.monotonic() - started
    assert child.proc.returncode == 3, child.stderr
    assert took < 40, took
    by_host = _summary(tmp_path)
    [hung] = by_host[host["name"]]
    assert hung["status"] == "error" and "ran past 7s" in hung["message"], hung
    for other in lab["hosts"][1:]:
        measured = {c["id"]: c["status"] for c in by_host[other["name"]] if c["id"].startswith("perf.")}
        assert measured and "error" not in measured.values(), measured
    assert leftovers(env) == []


def test_sshd_dying_mid_run_is_an_error_for_that_host_only(lab: dict[str, Any], tmp_path: Path) -> None:
    # Last in this module: the host stays down.
    with stalled(lab, 0) as host:
        env, child = _others_done(lab, tmp_path)
        # Everything in the host's namespace: its sshd, the session sshd forked (in its own session), the command.
        pids = subprocess.run(
            ["ip", "netns", "pids", host["namespace"]], capture_output=True, text=True, check=True
        ).stdout.split()
        assert pids
        for pid in pids:
            # The host's sshd is its PID namespace's init: once it is killed, the kernel ends the rest.
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        child.proc.wait(timeout=60)
        child.reader.join(5)
    assert child.proc.returncode == 3, child.stderr
    assert "Traceback" not in child.stderr
    by_host = _summary(tmp_path)
    assert [c["status"] for c in by_host[host["name"]]] == ["error"], by_host[host["name"]]
    for other in lab["hosts"][1:]:
        checks = by_host[other["name"]]
        assert len(checks) > 10 and all(c["status"] != "error" for c in checks), checks
    assert leftovers(env) == []
