"""CPU training images/s with 1 and 2 workers (Horovod over Gloo), through `gpuready validate training`.

Usage: .venv/bin/python benchmarks/cpu_training.py [--model densenet121] [--image-size 224]
       [--batch-size 16] [--steps 10]
Prints the figures the run computed from its raw step times, and the run folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="densenet121")
    parser.add_argument("--image-size", default="224")
    parser.add_argument("--batch-size", default="16")
    parser.add_argument("--steps", default="10")
    parser.add_argument("--gpus", default="1,2")
    args = parser.parse_args()
    artifacts = Path(tempfile.mkdtemp(prefix="gpuready-bench-"))
    cmd = [
        sys.executable,
        "-m",
        "gpuready.core.cli",
        "validate",
        "training",
        "--gpus",
        args.gpus,
        "--model",
        args.model,
        "--image-size",
        args.image_size,
        "--batch-size",
        args.batch_size,
        "--steps",
        args.steps,
        "--warmup-steps",
        "3",
        "--artifacts",
        str(artifacts),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"run failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    (run,) = list(artifacts.iterdir())
    summary = json.loads((run / "summary.json").read_text())["metrics"]["training"]
    print(f"{args.model}, {args.image_size}px, batch {args.batch_size}/worker, {args.steps} timed steps, CPU")
    for row in summary["sizes"]:
        eff = "" if row["efficiency"] is None else f"  efficiency {100 * row['efficiency']:.1f}%"
        print(
            f"{row['workers']} worker(s): {row['images_per_second']:8.2f} images/s total, "
            f"{row['images_per_second_per_worker']:8.2f} per worker{eff}"
        )
    print(f"run folder: {run}")


if __name__ == "__main__":
    main()
