"""Prometheus's own ``promtool``, the judge of every textfile gpuready writes.

Built from Prometheus's Go module (github.com/prometheus/prometheus, whose v0.3xx.y versions are the
Prometheus 3.xx.y releases) with the lab's Go build cache, so it is compiled once per version (minutes)
and found in ~/.cache/gpuready afterwards. Without Go, or when the build fails, the tests that need it skip
with the reason, and fail under CI=true.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import require

#: The newest version the Go module proxy serves that builds with the Go on these machines (go1.26).
PROMETHEUS_VERSION = "v0.316.0"


def promtool() -> Path:
    from gpuready.core.errors import Unreachable
    from gpuready.lab.gobuild import GO_FALLBACK, GoBuild

    require(shutil.which("go") or GO_FALLBACK.exists(), "Go (promtool is built from Prometheus's Go module)")
    build = GoBuild(
        name="promtool",
        version=PROMETHEUS_VERSION,
        module="github.com/prometheus/prometheus",
        commands={"promtool": "github.com/prometheus/prometheus/cmd/promtool"},
        # Without the optional service discoveries (cloud SDKs, Kubernetes): `check metrics` needs none, and
        # the build is a fraction (Prometheus README, "Service discovery plugins": remove_all_sd).
        tags="remove_all_sd",
    )
    try:
        build.ensure()
    except Unreachable as e:  # no Go module proxy, a compile error: skipped here, a failure under CI=true
        require(False, f"promtool could not be built: {e}")
    return build.binary("promtool")


def check_metrics(text: str) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics`` on ``text`` (its stdin): exit 0 when it parses and the lint finds nothing."""
    return subprocess.run(
        [str(promtool()), "check", "metrics"], input=text, capture_output=True, text=True, timeout=120, check=False
    )
