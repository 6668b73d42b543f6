"""Shared test helpers.

``require(ok, reason)``: a test that needs a real part (root, vcsim, mmdebstrap, TensorFlow...)
skips with ``reason`` on a developer machine, and fails under CI=true, where every
prerequisite must have been installed by `make test`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

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
    finished = os.environ.get("GPUREADY_TEST_FINISHED")
    if finished and not hasattr(session.config, "workerinput"):
        Path(finished).write_text(f"{int(exitstatus)}\n")


@pytest.fixture(scope="session")
def gpuready_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gpuready's wheel built from this tree, without its dependencies (as the GPU runbook carries it)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("gpuready-*.whl")
    return built
