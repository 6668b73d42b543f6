"""`gpuready inventory check` on generated inventories of N hosts, against `ansible-inventory --list`.

For each size it writes an inventory (hosts spread over gpu_nodes sub-groups, two node classes,
a few host variables each), then times, in the same run and on the same files:

- the floor: `ansible-inventory --list` (Ansible parsing the same inventory, nothing else);
- `gpuready inventory check` (parse, schema, every host's variables, summary.json/junit.xml/report.md).

Usage: .venv/bin/python benchmarks/inventory_scale.py --sizes 1000,2500,5000,10000 --runs 1
"""

from __future__ import annotations

import argparse
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
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in sizes:
            inv = write_inventory(root, n)
            floor = [
                timed([str(BIN / "ansible-inventory"), "-i", str(inv / "hosts.yml"), "--list"])
                for _ in range(args.runs)
            ]
            ours = [
                timed([str(BIN / "gpuready"), "inventory", "check", "-i", str(inv), "--artifacts", str(root / "runs")])
                for _ in range(args.runs)
            ]
            row = (n, *(statistics.median(x[i] for x in runs) for runs in (floor, ours) for i in (0, 1)))
            rows.append(row)
            _, f_wall, f_cpu, o_wall, o_cpu = row
            print(
                f"{n:>6} hosts: ansible-inventory --list wall {f_wall:6.2f}s cpu {f_cpu:6.2f}s | "
                f"gpuready inventory check wall {o_wall:6.2f}s cpu {o_cpu:6.2f}s "
                f"({1000 * o_cpu / n:.2f} ms cpu/host, {o_cpu / f_cpu:.2f}x the floor's cpu)",
                flush=True,
            )
    small, big = rows[0], rows[-1]
    print(
        f"{big[0]} / {small[0]} hosts: gpuready cpu {big[4] / small[4]:.2f}x, floor cpu {big[2] / small[2]:.2f}x "
        f"for {big[0] / small[0]:.1f}x the hosts; goal: under 10 s at 10,000 hosts, linear"
    )


if __name__ == "__main__":
    main()
