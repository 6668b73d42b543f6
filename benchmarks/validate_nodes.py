"""Wall time of `gpuready validate gpu-node` over 1, 8 and 64 namespace hosts (real SSH), against the floor
(one command per host over plain parallel ssh) and a peer (Ansible ad-hoc `command`), in the same run.

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

from gpuready.lab import nodes  # noqa: E402

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
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gpuready.core.cli",
                    "validate",
                    "gpu-node",
                    "-i",
                    str(inventory),
                    "--artifacts",
                    artifacts,
                    "--workers",
                    str(workers),
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=False,
                env={**os.environ, "COLUMNS": "200"},
            )
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
    return {
        "wall": statistics.median(walls),
        "fanout": statistics.median(fanouts),
        "host": statistics.median(per_host) if per_host else 0.0,
        "cpu": statistics.median(cpu),
        "remote": statistics.median(remote),
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def floor(state: dict, runs: int) -> dict[str, float]:
    """One `nvidia-smi -q -x` per host over plain ssh, all hosts at once (the least any tool can do)."""
    walls, cpu = [], []
    for _ in range(runs):
        before, started = _children_cpu(), time.monotonic()
        procs = [
            subprocess.Popen(
                [
                    "ssh",
                    "-i",
                    state["key"],
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "StrictHostKeyChecking=no",
                    "-o",
                    "UserKnownHostsFile=/dev/null",
                    "-o",
                    "LogLevel=ERROR",
                    f"root@{h['address']}",
                    "nvidia-smi -q -x",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for h in state["hosts"]
        ]
        codes = [p.wait() for p in procs]
        walls.append(time.monotonic() - started)
        cpu.append(_children_cpu() - before)
        if any(codes):
            raise SystemExit(f"floor: ssh failed on {codes.count(1) + codes.count(255)} host(s)")
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpu)}


def peer(inventory: Path, runs: int, forks: int) -> dict[str, float]:
    """Ansible ad-hoc `command: nvidia-smi -q -x` on every host (the peer a user would reach for)."""
    ansible = Path(sys.executable).with_name("ansible")
    walls, cpu = [], []
    for _ in range(runs):
        before, started = _children_cpu(), time.monotonic()
        done = subprocess.run(
            [
                str(ansible),
                "-i",
                str(inventory),
                "gpu_nodes",
                "-m",
                "ansible.builtin.command",
                "-a",
                "nvidia-smi -q -x",
                "-f",
                str(forks),
            ],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "ANSIBLE_HOST_KEY_CHECKING": "False",
                "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
                "ANSIBLE_DEPRECATION_WARNINGS": "False",
            },
            check=False,
        )
        walls.append(time.monotonic() - started)
        cpu.append(_children_cpu() - before)
        if done.returncode != 0:
            raise SystemExit(f"peer: ansible exited {done.returncode}: {done.stdout[-1500:]}{done.stderr[-1500:]}")
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpu)}


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
            state = nodes.up_hosts(
                root,
                [PROFILES[i % len(PROFILES)] for i in range(size)],
                f"g{size}x{os.getpid() % 10000}",
                lambda argv, log=log: subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True).pid,
            )
            setup = time.monotonic() - started
            try:
                inventory = nodes.write_inventory(root / "inventory", state)
                results[size] = measure(inventory, args.runs, args.workers, state["pids"])
                results[size]["floor"] = floor(state, args.runs)
                results[size]["peer"] = peer(inventory, args.runs, args.workers)
            finally:
                nodes.down_hosts(state)
        r = results[size]
        f, p = r["floor"], r["peer"]
        print(
            f"{size:3d} hosts: gpuready wall {r['wall']:6.2f}s (fan-out {r['fanout']:5.2f}s) client CPU "
            f"{r['cpu']:5.2f}s ({r['cpu'] / size:5.3f}/host) | floor ssh wall {f['wall']:5.2f}s CPU {f['cpu']:5.2f}s "
            f"| ansible ad-hoc wall {p['wall']:6.2f}s CPU {p['cpu']:6.2f}s | gpuready/floor "
            f"{r['wall'] / f['wall']:4.2f}x, ansible/gpuready {p['wall'] / r['wall']:4.2f}x "
            f"(lab set-up {setup:5.1f}s, not counted)",
            flush=True,
        )


if __name__ == "__main__":
    main()
