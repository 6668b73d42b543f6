"""`gpuready inventory check` on generated inventories of N hosts, against `ansible-inventory --list`.

For each size it writes an inventory (hosts spread over gpu_nodes sub-groups, two node classes,
a few host variables each), then times, in the same run and on the same files:

- the floor: Python reading hosts.yml with libyaml and nothing else (what any checker must at least do);
- the peer tool: `ansible-inventory --list` (Ansible parsing the inventory and printing every host's variables);
- `gpuready inventory check` (parse, schema, every host's variables, summary.json/junit.xml/report.md).

The load average is printed before and after: on a shared machine the wall figures move with it.

Usage: .venv/bin/python benchmarks/inventory_scale.py --sizes 1000,2500,5000,10000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent


def write_inventory(root: Path, hosts: int) -> Path:
    inv = root / f"inv-{hosts}"
    (inv / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    racks: dict[str, dict] = {}
    for i in range(hosts):
        rack = f"rack{i // 40:03d}"
        racks.setdefault(rack, {"hosts": {}})["hosts"][f"gpu{i:05d}"] = {
            "ansible_host": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
            "ansible_user": "root",
            "gpuready_node_class": "hgx-h100" if i % 2 else "c4140-v100",
        }
    (inv / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"children": racks}}, sort_keys=False))
    settings = {
        "gpuready": {
            "node_classes": {
                "c4140-v100": {"gpu_model": "Tesla V100-SXM2-32GB", "gpu_count": 4},
                "hgx-h100": {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8},
            },
            "driver": {"branch": "550"},
        }
    }
    (inv / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump(settings))
    return inv


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the command and its children): on a shared machine the
    CPU figure is the one that does not move with the load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-500:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,2500,5000,10000")
    parser.add_argument("--runs", type=int, default=1, help="runs per size (the median is reported)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in sizes:
            inv, runs = write_inventory(root, n), root / "runs"
            commands = {
                "floor": [sys.executable, "-c", READ_YAML, str(inv / "hosts.yml")],
                "peer": [str(BIN / "ansible-inventory"), "-i", str(inv / "hosts.yml"), "--list"],
                "ours": [str(BIN / "gpuready"), "inventory", "check", "-i", str(inv), "--artifacts", str(runs)],
            }
            # Interleaved, so a change in the machine's load falls on every command alike.
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, argv in commands.items():
                    times[name].append(timed(argv))
            median = {name: tuple(statistics.median(t[i] for t in got) for i in (0, 1)) for name, got in times.items()}
            rows.append((n, median))
            (fw, fc), (pw, pc), (ow, oc) = median["floor"], median["peer"], median["ours"]
            print(
                f"{n:>6} hosts: floor (libyaml read) wall {fw:5.2f}s cpu {fc:5.2f}s | "
                f"ansible-inventory --list wall {pw:6.2f}s cpu {pc:6.2f}s | "
                f"gpuready inventory check wall {ow:6.2f}s cpu {oc:6.2f}s "
                f"({1000 * oc / n:.2f} ms cpu/host, {oc / pc:.2f}x ansible-inventory's cpu)",
                flush=True,
            )
    (small, s_times), (big, b_times) = rows[0], rows[-1]
    print(
        f"{big} / {small} hosts: gpuready cpu {b_times['ours'][1] / s_times['ours'][1]:.2f}x, "
        f"ansible-inventory cpu {b_times['peer'][1] / s_times['peer'][1]:.2f}x for {big / small:.1f}x the hosts; "
        "goal: under 10 s at 10,000 hosts, linear"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)


READ_YAML = "import sys, yaml; yaml.load(open(sys.argv[1], 'rb'), Loader=yaml.CSafeLoader)"


if __name__ == "__main__":
    main()
