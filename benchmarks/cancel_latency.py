"""Seconds from Ctrl-C (SIGINT) to gpuready's exit, on a run that waits on something that never answers.

- provision: `provision cluster` on inventories/local with a play whose second task pauses for 30 minutes
  (ansible-playbook prints nothing while it waits); signalled once that task has started.
- gpu-node: `validate gpu-node` on this machine plus a host whose SSH port accepts and never answers;
  signalled once this machine's checks are done.

Each run checks that the exit code is 130 and that no process of the run is left. The load average is printed
before and after: on a shared machine the figures move with it.

Usage: .venv/bin/python benchmarks/cancel_latency.py --runs 8 [--only provision|gpu-node]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.playbooks import site, waiting_play  # noqa: E402
from tests.processes import Child, leftovers, new_mark  # noqa: E402
from tests.unit.core.test_bad_inputs import make_inventory, with_settings  # noqa: E402


def provision(tmp: Path) -> tuple[float, int, list[str]]:
    playbooks = site(tmp, waiting_play({"minutes": 30}, prefix="Quiet"))
    runs = tmp / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(playbooks), **new_mark()}
    child = Child(["provision", "cluster", "-i", str(ROOT / "inventories" / "local"), "--artifacts", str(runs)], env)
    deadline = time.monotonic() + 120
    while not any("Quiet | Wait" in p.read_text() for p in runs.glob("*/ansible/artifacts/*/job_events/*.json")):
        if time.monotonic() > deadline or child.proc.poll() is not None:
            raise SystemExit(f"the play did not reach its pause: {child.stderr}")
        time.sleep(0.05)
    took = child.signal_and_wait(signal.SIGINT, limit=60)
    return took, child.proc.returncode, leftovers(env)


def gpu_node(tmp: Path) -> tuple[float, int, list[str]]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        silent = {"ansible_host": "127.0.0.1", "ansible_port": server.getsockname()[1], "ansible_user": "root"}
        hosts = {"gpu_nodes": {"hosts": {"here": {"ansible_connection": "local"}, "hangs": silent}}}
        inv = make_inventory(tmp, hosts=hosts, settings=with_settings(node_classes__v100__gpu_count=0))
        env = new_mark()
        args = ["validate", "gpu-node", "-i", str(inv), "--artifacts", str(tmp / "runs"), "--host-timeout", "600"]
        child = Child(args, env)
        child.wait_for("here: ")
        took = child.signal_and_wait(signal.SIGINT, limit=60)
        return took, child.proc.returncode, leftovers(env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--only", choices=["provision", "gpu-node"])
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    for name, case in (("provision", provision), ("gpu-node", gpu_node)):
        if args.only and args.only != name:
            continue
        times = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                took, code, left = case(Path(tmp))
            if code != 130 or left:
                raise SystemExit(f"{name}: exit {code}, left {left}")
            times.append(took)
        shown = " ".join(f"{t:.2f}" for t in times)
        print(f"{name}: {shown} s (median {sorted(times)[len(times) // 2]:.2f}, max {max(times):.2f})")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
