"""Shared test helpers.

``require(ok, reason)``: a test that needs a real part (root, vcsim, mmdebstrap, TensorFlow...)
skips with ``reason`` on a developer machine, and fails under CI=true, where every
prerequisite must have been installed by `make test`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import scheduling

# Property tests judge behaviour, not speed: a loaded machine (CI beside other jobs) must not turn
# hypothesis' generation-time health check or per-example deadline into a failure.
settings.register_profile("gpuready", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gpuready")

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(ok: object, reason: str) -> None:
    if ok:
        return
    if IN_CI:
        pytest.fail(f"CI=true and a prerequisite is missing: {reason}", pytrace=False)
    pytest.skip(reason)


def gpuready(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: int = 600, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real ``gpuready`` command line in a child process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "gpuready.core.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        input=input,
    )


def provision_cluster(
    inventory: str | Path, runs: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``gpuready provision cluster`` on ``inventory`` with ``options``, its run folders under ``runs``."""
    return gpuready("provision", "cluster", "-i", str(inventory), *options, "--artifacts", str(runs), env=env)


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


def import_torch_stack() -> None:
    """Import torch's compiler stack (torchvision imports it) with the interpreter's own ``sys.intern``.

    ansible-core swaps ``sys.intern`` for a callable object when it is imported in a process, and
    torch._dynamo refuses to register its polyfill for anything but the builtin. gpuready never has both
    in one process (training runs in torchrun's workers), but a pytest session does: tests that use
    torch in-process call this first.
    """
    current = sys.intern
    sys.intern = getattr(current, "unpatched_implementation", current)
    try:
        import torch._dynamo  # noqa: F401
    finally:
        sys.intern = current


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Leave the mark scripts/test looks for: the session reached its end (no test ended the process).

    Under pytest-xdist only the controller writes it, once every worker has reported: a worker's end says
    nothing of the others."""
    if hasattr(session.config, "workerinput"):
        return
    scheduling.save(_measured)
    finished = os.environ.get("GPUREADY_TEST_FINISHED")
    if finished:
        Path(finished).write_text(f"{int(exitstatus)}\n")


#: Tests that share a lab run on one pytest-xdist worker, one after the other: by path under tests/, the first
#: match wins. The Kubernetes modules share one control plane for the session (kubernetes/conftest.py), the
#: nodes lab's hosts take fixed names and addresses, and the two PyTorch modules read one real sweep
#: (workloads/conftest.py). Every other test runs with the rest of its module, so a module's fixtures (a lab,
#: a Debian root, an installed wheel) are built once, not once per worker; the Debian-root modules share only
#: the cached root tarball, built behind a lock, and so run side by side.
LAB_GROUPS = (
    ("tests/integration/kubernetes/", "kubernetes"),
    ("tests/integration/vsphere/", "vcsim"),
    ("tests/integration/node/", "nodes-lab"),
    ("tests/integration/provision/test_reads_over_ssh.py", "nodes-lab"),
    ("tests/integration/workloads/test_pytorch_run.py", "pytorch-cpu-sweep"),
    ("tests/integration/workloads/test_training_progress_and_metrics.py", "pytorch-cpu-sweep"),
)


def xdist_group(nodeid: str) -> str:
    """The work unit of a test under ``--dist loadgroup``: its lab's group, else its module."""
    module = nodeid.split("::", 1)[0]
    return next((group for prefix, group in LAB_GROUPS if module.startswith(prefix)), module)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with the groups of :data:`LAB_GROUPS`, worked out from the test ids, longest group first.

    pytest-xdist 3.8 passes ``xdist_group`` marks to its scheduler by renaming each test id, which pytest
    9.2's structured ids no longer take (pytest-dev/pytest-xdist#1386): the marks would be ignored silently.
    The scheduler below groups by id instead, whatever pytest does with them, and hands out the groups by the
    durations the previous runs recorded (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    return scheduling.longest_first(LoadScopeScheduling, xdist_group, scheduling.load())(config, log)


#: Each test's duration in this run (setup, call and teardown), as the controller hears of it.
_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[report.nodeid] = _measured.get(report.nodeid, 0.0) + report.duration


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


ModuleTmp = Callable[[str], Path]


@pytest.fixture(scope="module")
def module_tmp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleTmp]:
    """Folders for a module's shared fixtures, removed when the module ends with none of its tests failed.

    What ``tmp_path_factory.mktemp`` makes stays until the session ends, and the modules' shared fixtures
    are large (a Debian root is 580 MB, the installed wheel's venv 600 MB): kept to the end of the slow tier
    they summed to 7 GB on two workers and filled CI's disk. tmp_path_retention_policy = "failed"
    (pyproject.toml) does the same for each test's own tmp_path; both keep what a failure leaves to read.
    Fixtures that mount into a folder undo the mount in their own teardown, which runs before this one."""
    made: list[Path] = []
    failed_before = request.session.testsfailed

    def make(name: str) -> Path:
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]

    yield make
    if request.session.testsfailed == failed_before:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def gpuready_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gpuready's wheel built from this tree, without its dependencies (as the GPU runbook carries it).

    Built once per test run: pytest-xdist's workers share the run's folder above their own temporary folders,
    and the lock keeps two setuptools builds out of this tree's build/ at the same time."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out = shared / "gpuready-wheel"
    with _locked(shared / "gpuready-wheel.lock"):
        if not any(out.glob("gpuready-*.whl")):
            subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                check=True,
                capture_output=True,
                timeout=300,
            )
    (built,) = out.glob("gpuready-*.whl")
    return built
