"""Start-up time of `gpuready --help` against bare `python -c pass`, on the same machine.

Usage: .venv/bin/python benchmarks/startup.py [--runs N]
Goal: under 0.3 s and within 5x of bare Python.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], runs: int) -> list[float]:
    subprocess.run(argv, capture_output=True, check=True)  # warm the OS caches once
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    script = shutil.which("gpuready", path=str(Path(sys.executable).parent)) or "gpuready"
    bare = timed([sys.executable, "-c", "pass"], args.runs)
    cli = timed([script, "--help"], args.runs)
    b, c = statistics.median(bare), statistics.median(cli)
    print(f"python -c pass   median {b * 1000:6.1f} ms  (min {min(bare) * 1000:.1f}, max {max(bare) * 1000:.1f})")
    print(f"gpuready --help  median {c * 1000:6.1f} ms  (min {min(cli) * 1000:.1f}, max {max(cli) * 1000:.1f})")
    print(f"ratio {c / b:.2f}x; goal: under 300 ms and within 5x -> {'met' if c < 0.3 and c / b <= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
