"""`gpuready lab up --components kubernetes` refuses bad switches with one line, exit 2, before building or
starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import gpuready


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("kubernetes.fail=gpu-on-fire", "unknown fail=gpu-on-fire"),
        ("kubernetes.flavour=nomad", "flavour must be kubernetes or openshift"),
        ("kubernetes.colour=blue", "unknown option(s) colour"),
        ("kubernetes.nodes=0", "nodes must be a number from 1 to 1000"),
        ("kubernetes.nodes=1001", "nodes must be a number from 1 to 1000"),
        ("kubernetes.fail=vector-add-fails,vector-add-fails,vector-add-fails", "3 faults for 2 GPU node(s)"),
    ],
)
def test_bad_lab_switch_is_exit_2_one_line(tmp_path: Path, setting: str, words: str) -> None:
    r = gpuready("lab", "up", "--components", "kubernetes", "--set", setting, "--lab-dir", str(tmp_path))
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1 and words in errors[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "kubernetes" / "logs").exists()  # nothing was started


# kube-apiserver's /readyz?verbose while its start-up hooks run (the format of kubernetes.io's "Kubernetes API
# health endpoints": one [+]/[-] line per check, then the verdict).
STARTING = (
    "[+]ping ok\n[+]log ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n"
    "[-]poststarthook/crd-informer-synced failed: reason withheld\nreadyz check failed\n"
)


def test_readyz_names_the_failing_checks() -> None:
    from gpuready.lab.kubernetes import _failing_checks

    assert _failing_checks(STARTING) == "failing poststarthook/rbac/bootstrap-roles, poststarthook/crd-informer-synced"
    assert _failing_checks("[+]ping ok\nok\n") == ""


def _answers(*answers: tuple[bool, str]) -> object:
    queue = list(answers)
    return lambda: queue.pop(0) if len(queue) > 1 else queue[0]


class _Clock:
    """Time that moves only when the code under test sleeps: the outcome does not hang on how fast this machine
    polls (a loaded CI machine's sleeps overshoot)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuready.lab import kubernetes

    monkeypatch.setattr(kubernetes, "READY_TIMEOUT_S", 0.3)
    monkeypatch.setattr(kubernetes, "READY_MAX_S", 1.0)
    monkeypatch.setattr(kubernetes, "READY_POLL_S", 0.1)


def test_a_slow_api_server_that_makes_progress_is_waited_for(fast: None) -> None:
    from gpuready.lab.kubernetes import wait_until_ready

    # Each answer lasts 2 polls (0.2 s), so no answer outlasts the 0.3 s quiet limit, but the whole start takes
    # 0.6 s: longer than READY_TIMEOUT_S, which a fixed deadline would have failed.
    steps = [(False, "connection refused")] * 2 + [(False, "HTTP 500: failing a, b")] * 2
    steps += [(False, "HTTP 500: failing b")] * 2 + [(True, "")]
    probe, clock = _answers(*steps), _Clock()
    wait_until_ready(probe, lambda: True, lambda: "log", "https://127.0.0.1:1", clock.monotonic, clock.sleep)
    assert clock.now == pytest.approx(0.6)


def test_an_api_server_stuck_on_one_answer_is_one_line_with_its_log(fast: None) -> None:
    from gpuready.core.errors import Unreachable
    from gpuready.lab.kubernetes import wait_until_ready

    probe, clock = _answers((False, "HTTP 500: failing etcd")), _Clock()
    log = lambda: "E1123 etcd unreachable (see kube-apiserver.log)"  # noqa: E731
    with pytest.raises(Unreachable) as e:
        wait_until_ready(probe, lambda: True, log, "https://x", clock.monotonic, clock.sleep)
    assert 0.3 <= clock.now < 0.4 + 1e-9  # READY_TIMEOUT_S of the same answer (within a poll), not READY_MAX_S
    message = str(e.value)
    assert "not ready after" in message
    assert "failing etcd" in message and "etcd unreachable" in message and "\n" not in message


def test_progress_does_not_wait_past_the_limit(fast: None) -> None:
    import itertools

    from gpuready.core.errors import Unreachable
    from gpuready.lab.kubernetes import wait_until_ready

    counter, clock = itertools.count(), _Clock()
    with pytest.raises(Unreachable, match="not ready after"):
        wait_until_ready(
            lambda: (False, f"HTTP 500: step {next(counter)}"),
            lambda: True,
            lambda: "log",
            "https://x",
            clock.monotonic,
            clock.sleep,
        )
    assert 1.0 <= clock.now < 1.1 + 1e-9  # went on past READY_TIMEOUT_S, stopped at READY_MAX_S (within a poll)


def test_an_api_server_that_exits_is_reported_at_once(fast: None) -> None:
    from gpuready.core.errors import Unreachable
    from gpuready.lab.kubernetes import wait_until_ready

    with pytest.raises(Unreachable, match="kube-apiserver exited: F1123 bad flag"):
        wait_until_ready(_answers((False, "refused")), lambda: False, lambda: "F1123 bad flag", "https://x")


def test_the_lab_s_ports_are_four_different_ones() -> None:
    """In a network namespace whose ephemeral range holds exactly four ports, the four chosen are those four:
    Linux's bind(port 0) prefers the odd ports of the range, so ports let go one by one repeat there."""
    import os
    import shutil
    import subprocess
    import sys

    from tests.conftest import ROOT, require

    require(os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip"), "needs root, unshare and ip")
    script = (
        'ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range="40000 40003" && '
        f'exec {sys.executable} -c "from gpuready.lab.kubernetes import free_ports; print(*sorted(free_ports(4)))"'
    )
    done = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["40000", "40001", "40002", "40003"]
