"""Wall time and client CPU of `gpuready validate gpu-node` over 1, 8 and 64 namespace hosts (real SSH),
against the floor (one command per host over plain parallel ssh) and a peer (Ansible ad-hoc `command`), in the
same run.

Needs root (network namespaces). Usage:
    .venv/bin/python benchmarks/validate_nodes.py [--sizes 1,8,64] [--runs 3] [--kex default,curve25519-sha256]
Prints one line per size and key exchange: the CLI's wall time (median of the runs), the fan-out's own time
(from summary.json metrics), the client CPU (see below), the ssh connections each host accepted, and the same
for the floor and the peer.

Client CPU is what the measured command and every process it starts use on this machine, read from a cpuacct
cgroup the command is started in: ssh clients, shells, and ssh ControlPersist masters that detach from their
parent (Ansible's), which ``RUSAGE_CHILDREN`` would miss. The simulated hosts' sshds, their sessions and the
replayed tools also run on this machine, but were started before, outside that cgroup, so they are not in it.
Without a writable cgroup it falls back to ``RUSAGE_CHILDREN`` and says so.

Hosts CPU is what the simulated hosts spent during the same command (their sshds are started in a cgroup of
their own; sessions and replayed tools follow): on a real cluster that work runs on the nodes, here it shares
this machine's cores with the client, so it bounds the wall time a tool can reach against the floor, which asks
each host for one command where gpuready's catalogue asks for about 25.

``--kex`` runs every size once per key exchange: ``default`` leaves ssh's own choice (OpenSSH 9.x prefers a
post-quantum hybrid, sntrup761x25519 or mlkem768x25519, which costs the client far more CPU than the rest of a
session); any other value is passed to all three tools as ``-o KexAlgorithms=<value>`` the way a site would set
it for Ansible (``ansible_ssh_common_args`` in the inventory).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuready.lab import nodes  # noqa: E402

PROFILES = ["v100-x4", "a100-x4", "h100-x8", "throttle"]


class ClientCpu:
    """CPU seconds of a command and everything it starts, from a cpuacct cgroup it is started in."""

    def __init__(self, name: str = "client") -> None:
        self.group: Path | None = None
        for base, usage in ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"), (Path("/sys/fs/cgroup"), "cpu.stat")):
            if (base / usage).exists() or (base / "cgroup.procs").exists():
                group = base / f"gpuready-bench-{name}-{os.getpid()}"
                try:
                    group.mkdir(exist_ok=True)
                except OSError:
                    continue
                if (group / usage).exists():
                    self.group, self.usage = group, usage
                    break
                group.rmdir()
        self.source = "cgroup" if self.group else "RUSAGE_CHILDREN (no writable cgroup: detached processes missed)"

    def seconds(self) -> float:
        if self.group is None:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        text = (self.group / self.usage).read_text()
        if self.usage == "cpu.stat":
            return int(re.search(r"usage_usec (\d+)", text).group(1)) / 1e6
        return int(text) / 1e9

    def enter(self) -> Callable[[], None] | None:
        """A preexec_fn that moves the new process into the group (its children follow)."""
        if self.group is None:
            return None
        procs = self.group / "cgroup.procs"
        return lambda: procs.write_text(str(os.getpid()))

    def close(self) -> None:
        """Stop what is still in the group (Ansible's ControlPersist ssh masters, started by this run), drop it."""
        if self.group is None:
            return
        for _ in range(20):
            pids = [int(p) for p in (self.group / "cgroup.procs").read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            try:
                self.group.rmdir()
                return
            except OSError:
                time.sleep(0.5)


def accepted(log: Path) -> int:
    """Connections the hosts' sshds accepted so far (their log, LogLevel INFO)."""
    return log.read_text(errors="replace").count("Accepted publickey")


@dataclass
class Meters:
    """What one command costs: wall time, client CPU, the simulated hosts' CPU (their sshds, sessions and
    replayed tools, which run on this machine too) and the connections the hosts accepted."""

    client: ClientCpu
    hosts: ClientCpu
    log: Path

    def run(self, argv: list[str], **kwargs: Any) -> tuple[dict[str, float], Any]:
        before, on_hosts, connections = self.client.seconds(), self.hosts.seconds(), accepted(self.log)
        started = time.monotonic()
        done = subprocess.run(argv, preexec_fn=self.client.enter(), check=False, **kwargs)
        wall = time.monotonic() - started
        time.sleep(0.2)  # let the sshds write their last lines
        return {
            "wall": wall,
            "cpu": self.client.seconds() - before,
            "hosts_cpu": self.hosts.seconds() - on_hosts,
            "connections": accepted(self.log) - connections,
        }, done


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def measure(inventory: Path, runs: int, workers: int, meters: Meters) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as artifacts:
            argv = [sys.executable, "-m", "gpuready.core.cli", "validate", "gpu-node", "-i", str(inventory)]
            argv += ["--artifacts", artifacts, "--workers", str(workers)]
            sample, done = meters.run(
                argv, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"}
            )
            if done.returncode not in (0, 1):
                raise SystemExit(f"validate gpu-node exited {done.returncode}: {done.stderr[-2000:]}")
            summary = json.loads(next(Path(artifacts).glob("*/summary.json")).read_text())
            samples.append(sample | {"fanout": summary["metrics"]["wall_seconds"]})
    return medians(samples)


def catalogue_batch(inventory: Path) -> str:
    """The one command gpuready sends every host of these profiles: the catalogue's fixed commands, then its
    measuring commands under the inventory's settings, in one batch (one connection)."""
    from gpuready.core import inventory as inventories
    from gpuready.core.settings import NodeClass
    from gpuready.validate.node import checks
    from gpuready.validate.node.node import Node

    settings = inventories.load(inventory).settings
    node = Node("floor", None, NodeClass(gpu_count=0), settings)
    fixed = list(dict.fromkeys(checks.prefetch_commands(node)))
    return node.batch(fixed, then=checks.perf_commands(settings), then_timeout=checks.perf_budget(settings))


def floor(
    state: dict, runs: int, kex: list[str], meters: Meters, command: str = "nvidia-smi -q -x"
) -> dict[str, float]:
    """One command per host over plain ssh, all hosts at once: `nvidia-smi -q -x` (the least any tool can do to
    read a node), or gpuready's own batch (the same work on the nodes, without gpuready on this side)."""
    ssh = ["ssh", "-i", state["key"], "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"]
    ssh += ["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", *kex]
    samples = []
    # The command travels in a file: 64 copies of a batch in one `sh -c` argument would pass the kernel's limit.
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as batch:
        batch.write(command)
        batch.flush()
        script = f"B=$(cat {batch.name}); " + " & ".join(
            " ".join([*ssh, f"root@{h['address']}", '"$B" >/dev/null']) for h in state["hosts"]
        )
        for _ in range(runs):
            sample, _ = meters.run(["sh", "-c", script + " & wait"])
            if sample["connections"] != len(state["hosts"]):
                raise SystemExit(f"floor: {sample['connections']} of {len(state['hosts'])} ssh connections accepted")
            samples.append(sample)
    return medians(samples)


def peer(inventory: Path, runs: int, forks: int, meters: Meters) -> dict[str, float]:
    """Ansible ad-hoc `command: nvidia-smi -q -x` on every host (the peer a user would reach for).

    Its ssh ControlPersist masters live in a folder of this inventory's own, so the first run opens every
    connection and later runs may reuse them, as they would for a user running it twice within a minute.
    """
    ansible = Path(sys.executable).with_name("ansible")
    samples = []
    for _ in range(runs):
        argv = [str(ansible), "-i", str(inventory), "gpu_nodes", "-m", "ansible.builtin.command"]
        argv += ["-a", "nvidia-smi -q -x", "-f", str(forks)]
        env = {
            **os.environ,
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(inventory / "cp"),
        }
        sample, done = meters.run(argv, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"peer: ansible exited {done.returncode}: {done.stdout[-1500:]}{done.stderr[-1500:]}")
        samples.append(sample)
    return medians(samples)


def write_inventory(folder: Path, state: dict, kex: list[str]) -> Path:
    inventory = nodes.write_inventory(folder, state)
    if kex:
        import yaml

        hosts = nodes.inventory_hosts(state)
        for variables in hosts["gpu_nodes"]["hosts"].values():
            variables["ansible_ssh_common_args"] = " ".join(kex)
        (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    return inventory


def line(
    size: int, r: dict[str, float], f: dict[str, float], b: dict[str, float], p: dict[str, float], setup: float
) -> str:
    def cost(m: dict[str, float], conns: bool = True) -> str:
        per_host = f"{m['cpu'] / size:5.3f}/host" + (f", {m['connections'] / size:g} conn/host" if conns else "")
        return f"client CPU {m['cpu']:5.2f}s ({per_host}) hosts CPU {m['hosts_cpu']:5.2f}s"

    return (
        f"gpuready wall {r['wall']:6.2f}s (fan-out {r['fanout']:5.2f}s) {cost(r)} | "
        f"floor wall {f['wall']:5.2f}s {cost(f, conns=False)} | "
        f"same-work floor wall {b['wall']:5.2f}s {cost(b, conns=False)} | ansible wall {p['wall']:6.2f}s {cost(p)} | "
        f"gpuready/floor {r['wall'] / f['wall']:4.2f}x, gpuready/same-work floor {r['wall'] / b['wall']:4.2f}x, "
        f"ansible/gpuready {p['wall'] / r['wall']:4.2f}x "
        f"(lab set-up {setup:5.1f}s, not counted)"
    )


def compile_bytecode() -> None:
    """Compile gpuready's own modules first, as pip does when it installs the wheel: a checkout run with
    PYTHONDONTWRITEBYTECODE set (as some machines set it) would otherwise compile them on every command, about
    0.07 CPU-s that no installed gpuready spends."""
    import compileall

    for package in ("core", "validate", "provision", "workloads"):
        compileall.compile_dir(ROOT / package, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,8,64")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--kex", default="default", help="comma-separated: default or KexAlgorithms values")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmarks/validate_nodes.py needs root (network namespaces)")
    compile_bytecode()
    cpu, hosts = ClientCpu(), ClientCpu("hosts")
    print(f"client CPU from {cpu.source}; load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            with tempfile.TemporaryDirectory(prefix="gpuready-bench-") as tmp:
                root = Path(tmp)
                log_path = root / "sshd.log"
                log = log_path.open("ab")
                started = time.monotonic()
                state = nodes.up_hosts(
                    root,
                    [PROFILES[i % len(PROFILES)] for i in range(size)],
                    f"g{size}x{os.getpid() % 10000}",
                    lambda argv, log=log: (
                        subprocess.Popen(
                            argv, stdout=log, stderr=log, start_new_session=True, preexec_fn=hosts.enter()
                        ).pid
                    ),
                )
                meters = Meters(cpu, hosts, log_path)
                setup = time.monotonic() - started
                try:
                    for kex_name in args.kex.split(","):
                        kex = [] if kex_name == "default" else ["-o", f"KexAlgorithms={kex_name}"]
                        inventory = write_inventory(root / f"inventory-{kex_name}", state, kex)
                        load = os.getloadavg()[0]
                        r = measure(inventory, args.runs, args.workers, meters)
                        f = floor(state, args.runs, kex, meters)
                        b = floor(state, args.runs, kex, meters, catalogue_batch(inventory))
                        p = peer(inventory, args.runs, args.workers, meters)
                        span = f"{load:4.1f}-{os.getloadavg()[0]:4.1f}"
                        print(
                            f"{size:3d} hosts, kex {kex_name}, load {span}: {line(size, r, f, b, p, setup)}", flush=True
                        )
                finally:
                    nodes.down_hosts(state)
    finally:
        cpu.close()
        hosts.close()


if __name__ == "__main__":
    main()
