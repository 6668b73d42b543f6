"""Wall time of `gpuready provision cluster` on a Debian 12 root: a full apply, then the no-change second run.

Needs root, mmdebstrap, dpkg-dev and gnupg (scripts/install-system-deps). Uses the same cached
root and stand-in NVIDIA repository as the integration tests (tests/integration/provision).

    sudo .venv/bin/python benchmarks/provision_root.py [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.provision import debian_root as dr  # noqa: E402


def _provision(inventory: Path, runs: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuready.core.cli",
            "provision",
            "cluster",
            "-i",
            str(inventory),
            "--artifacts",
            str(runs),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"provision failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    summary = json.loads(sorted(runs.glob("*/summary.json"))[-1].read_text())
    return elapsed, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh roots to measure")
    args = parser.parse_args()
    ok, why = dr.prerequisites()
    if not ok:
        sys.exit(f"cannot run: {why}")
    dr.root_tarball()  # built once and cached; not part of the figures
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = dr.build_repo(base / "standin")
        for i in range(args.runs):
            root = dr.fresh_root(base / f"root{i}", repo)
            inventory = dr.write_inventory(base / f"inventory{i}", {"node1": root})
            with dr.booted_like(root):
                first, s1 = _provision(inventory, base / f"runs{i}")
                second, s2 = _provision(inventory, base / f"runs{i}")
            print(
                f"run {i + 1}: full apply {first:6.1f} s ({s1['metrics']['changed']} changed), "
                f"second run {second:6.1f} s ({s2['metrics']['changed']} changed)"
            )


if __name__ == "__main__":
    main()
