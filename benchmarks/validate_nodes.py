"""Wall time of `gpuready validate gpu-node` over 1, 8 and 64 namespace hosts (real SSH), and where it goes.

Needs root (network namespaces). Usage: .venv/bin/python benchmarks/validate_nodes.py [--sizes 1,8,64] [--runs 3]
Prints one line per size: the CLI's wall time (median of the runs), the fan-out's own time (from
summary.json metrics), the rest (interpreter start, imports, inventory load, reports), the
median per-host time, and the CPU seconds of the CLI with its ssh clients (the hosts' sshds and
the replayed tools run on the same machine here, outside that figure).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuready.core.lab import nodes  # noqa: E402

PROFILES = ["v100-x4", "a100-x4", "h100-x8", "throttle"]


def hosts_cpu(pids: list[int]) -> float:
    """CPU seconds of the hosts' sshds and every session they have reaped (fields utime..cstime)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])
    return total / ticks


def measure(inventory: Path, runs: int, workers: int, pids: list[int]) -> dict[str, float]:
    walls, fanouts, per_host, cpu, remote = [], [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as artifacts:
            started = time.monotonic()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            remote_before = hosts_cpu(pids)
            done = subprocess.run([sys.executable, "-m", "gpuready.core.cli", "validate", "gpu-node", "-i",
                                   str(inventory), "--artifacts", artifacts, "--workers", str(workers)],
                                  capture_output=True, text=True, cwd=ROOT, check=False,
                                  env={**os.environ, "COLUMNS": "200"})
            walls.append(time.monotonic() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU of the CLI and its children (ssh clients, shells); the hosts' sshds are not its children.
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            remote.append(hosts_cpu(pids) - remote_before)
            if done.returncode not in (0, 1):
                raise SystemExit(f"validate gpu-node exited {done.returncode}: {done.stderr[-2000:]}")
            summary = json.loads(next(Path(artifacts).glob("*/summary.json")).read_text())
            fanouts.append(summary["metrics"]["wall_seconds"])
            per_host += [float(s) for s in re.findall(r"\((\d+\.\d+)s\) ·", done.stderr)]
    return {"wall": statistics.median(walls), "fanout": statistics.median(fanouts),
            "host": statistics.median(per_host), "cpu": statistics.median(cpu),
            "remote": statistics.median(remote)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,8,64")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=64)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmarks/validate_nodes.py needs root (network namespaces)")
    results = {}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="gpuready-bench-") as tmp:
            root = Path(tmp)
            log = (root / "sshd.log").open("ab")
            started = time.monotonic()
            state = nodes.up_hosts(root, [PROFILES[i % len(PROFILES)] for i in range(size)],
                                   f"gb{os.getpid() % 100000}",
                                   lambda argv, log=log: subprocess.Popen(argv, stdout=log, stderr=log,
                                                                          start_new_session=True).pid)
            setup = time.monotonic() - started
            try:
                inventory = nodes.write_inventory(root / "inventory", state)
                results[size] = measure(inventory, args.runs, args.workers, state["pids"])
            finally:
                nodes.down_hosts(state)
        r = results[size]
        print(f"{size:3d} hosts: wall {r['wall']:6.2f}s  fan-out {r['fanout']:6.2f}s  "
              f"start+inventory+reports {r['wall'] - r['fanout']:5.2f}s  per host {r['host']:5.2f}s  "
              f"CPU: client {r['cpu']:5.2f}s hosts {r['remote']:5.2f}s  "
              f"(lab set-up {setup:5.1f}s, not counted)", flush=True)
    if 1 in results and 64 in results:
        ratio = results[64]["wall"] / results[1]["wall"]
        print(f"64 hosts / 1 host: {ratio:.2f}x (goal: at most 2x) -> {'met' if ratio <= 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
