"""`gpuready validate this-node --set quick` on a replayed node, against Python's start-up and a plain shell.

Usage: .venv/bin/python benchmarks/this_node.py [--runs N] [--profiles h100-x8,v100-x4]

For each profile of the nodes lab (gpuready.lab.replay: real nvidia-smi recordings on PATH, as the lab puts them on
its hosts'), in the same run and medians of N runs each, wall time and CPU (user + system of the process and of
every process it waited for, from wait4):
- the floor: `python -c pass` and `gpuready --version` (the interpreter, and the CLI's own start);
- `gpuready validate this-node --set quick` with the lab's settings and the profile's node class;
- the peers: the replayed `nvidia-smi -q -x` alone (what an NHC-like check reads first), and a plain shell running
  the very batch the quick set runs on the node (its commands, each under timeout(1); no gpuready on this side).
Goal: the quick set in at most 10 s and 2 CPU-seconds on a node.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.validate_nodes import compile_bytecode  # noqa: E402
from gpuready.lab import replay  # noqa: E402


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the child and the children it waited for) and exit status of one command."""
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def medians(argv: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    timed(argv, env)  # warm the OS caches once
    samples = [timed(argv, env) for _ in range(runs)]
    return {
        "wall": statistics.median(s[0] for s in samples),
        "cpu": statistics.median(s[1] for s in samples),
        "wall_max": max(s[0] for s in samples),
        "rc": samples[-1][2],
    }


def quick_batch(settings: Path, node_class: str) -> str:
    """The one shell command the quick set runs on the node (what Node.prefetch sends), for the plain-shell peer."""
    from gpuready.validate.node import checks, local
    from gpuready.validate.node.checks.selection import check_set
    from gpuready.validate.node.node import Node

    node = local.node_settings(settings, node_class)
    probe = Node("floor", None, node.node_class, node.settings)
    return probe.batch(list(dict.fromkeys(checks.prefetch_commands(probe, check_set("quick")))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--profiles", default="h100-x8,v100-x4")
    args = parser.parse_args()
    compile_bytecode()
    bin_dir = Path(sys.executable).parent
    cli = str(bin_dir / "gpuready")
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.runs} runs", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        settings = folder / "gpuready.yml"
        settings.write_text(yaml.safe_dump({"gpuready": replay.lab_settings()}))
        base = {**os.environ, "SLURMD_NODENAME": ""}
        rows = {
            "python -c pass": medians([sys.executable, "-c", "pass"], base, args.runs),
            "gpuready --version": medians([cli, "--version"], base, args.runs),
        }
        for name in args.profiles.split(","):
            profile = replay.PROFILES[name]
            env = {**base, "PATH": f"{replay.build(name, folder / name)}:{base['PATH']}"}
            quick = [
                cli,
                "validate",
                "this-node",
                "--set",
                "quick",
                "--settings",
                str(settings),
                "--node-class",
                profile.node_class,
                "--node-name",
                "gn01",
                "--verdict",
                str(folder / f"{name}.json"),
            ]
            rows[f"{name}: validate this-node --set quick"] = medians(quick, env, args.runs)
            rows[f"{name}: nvidia-smi -q -x (replayed)"] = medians(["nvidia-smi", "-q", "-x"], env, args.runs)
            batch = quick_batch(settings, profile.node_class)
            rows[f"{name}: sh -c <the quick set's batch>"] = medians(["sh", "-c", batch], env, args.runs)
        print(f"load average after {os.getloadavg()[0]:.1f}")
        for what, m in rows.items():
            print(f"{what:48} wall {m['wall']:6.3f}s (max {m['wall_max']:6.3f}s)  CPU {m['cpu']:6.3f}s  rc {m['rc']}")


if __name__ == "__main__":
    main()
