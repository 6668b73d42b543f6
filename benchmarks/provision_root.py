"""Wall time of `gpuready provision cluster` on a Debian 12 root: a full apply, then the no-change second run.

Needs root, mmdebstrap, dpkg-dev and gnupg (scripts/install-system-deps). Uses the same cached
root and stand-in NVIDIA repository as the integration tests (tests/integration/provision).
In the same run it measures the floor: ansible-playbook with gpuready's Ansible configuration
running one play that gathers facts and pings the same root (what any playbook run costs here).
`--profile N` prints the N tasks of the no-change run that took longest (from the job events).
CPU seconds (user + system of all the processes a run started) are printed too: on a shared machine
they move far less with the load than wall time.

    sudo .venv/bin/python benchmarks/provision_root.py [--runs 1] [--profile 15]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuready.core.runner import ansible_environment  # noqa: E402
from tests.integration.provision import debian_root as dr  # noqa: E402

FLOOR_PLAY = """- name: Floor | Facts and one module call
  hosts: gpu_nodes
  gather_facts: true
  tasks:
    - name: Floor | Ping
      ansible.builtin.ping:
"""


def _cpu() -> float:
    """CPU seconds of finished child processes (and theirs): steadier than wall time on a shared machine."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _provision(inventory: Path, runs: Path) -> tuple[float, float, dict, Path]:
    cpu = _cpu()
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
    cpu = _cpu() - cpu
    if done.returncode != 0:
        sys.exit(f"provision failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    latest = sorted(runs.glob("*/summary.json"))[-1]
    return elapsed, cpu, json.loads(latest.read_text()), latest.parent


def _floor(inventory: Path, work: Path) -> tuple[float, float]:
    work.mkdir()
    (work / "floor.yml").write_text(FLOOR_PLAY)
    env = ansible_environment(work)
    cpu = _cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory / "hosts.yml"), "floor.yml"],
        capture_output=True,
        text=True,
        cwd=work,
        env={"PATH": env["PATH"], **env, "HOME": str(work)},
    )
    elapsed = time.perf_counter() - start
    cpu = _cpu() - cpu
    if done.returncode != 0:
        sys.exit(f"floor playbook failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed, cpu


def _slowest(run_dir: Path, count: int) -> list[tuple[float, int, str]]:
    """(seconds, times run, task) of the run's tasks, slowest first, from ansible-runner's job events."""
    seconds: dict[str, float] = defaultdict(float)
    times: dict[str, int] = defaultdict(int)
    for path in run_dir.glob("**/job_events/*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event.get("event", "").startswith("runner_on_") and "duration" in data:
            seconds[data.get("task", "?")] += float(data["duration"] or 0)
            times[data.get("task", "?")] += 1
    return sorted(((s, times[t], t) for t, s in seconds.items()), reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh roots to measure")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the no-change run's N slowest tasks")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="work in DIR (emptied first) and keep the roots and artifacts"
    )
    args = parser.parse_args()
    ok, why = dr.prerequisites()
    if not ok:
        sys.exit(f"cannot run: {why}")
    dr.root_tarball()  # built once and cached; not part of the figures
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        if args.keep:
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
        repo = dr.build_repo(base / "standin")
        for i in range(args.runs):
            root = dr.fresh_root(base / f"root{i}", repo)
            inventory = dr.write_inventory(base / f"inventory{i}", {"node1": root})
            with dr.booted_like(root):
                first, first_cpu, s1, _ = _provision(inventory, base / f"runs{i}")
                second, second_cpu, s2, second_dir = _provision(inventory, base / f"runs{i}")
                floor, floor_cpu = _floor(inventory, base / f"floor{i}")
            print(
                f"run {i + 1}: full apply {first:6.1f} s ({s1['metrics']['changed']} changed), "
                f"second run {second:6.1f} s ({s2['metrics']['changed']} changed, {second / first:.0%} of the first), "
                f"floor {floor:5.1f} s\n"
                f"  CPU: full apply {first_cpu:6.1f} s, second run {second_cpu:6.1f} s "
                f"({second_cpu / first_cpu:.0%} of the first), floor {floor_cpu:5.1f} s"
            )
            if args.profile:
                total = sum(s for s, _, _ in _slowest(second_dir, 10**6))
                print(f"  no-change run: {total:.1f} s in tasks; slowest:")
                for seconds, times, task in _slowest(second_dir, args.profile):
                    print(f"  {seconds:6.2f} s  {times:3d}x  {task}")


if __name__ == "__main__":
    main()
