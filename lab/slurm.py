"""Lab component ``slurm``: a real Slurm cluster from Debian's slurm-wlm and munge packages.

One munged and one slurmctld on this machine (slurmctld in a UTS namespace of its own, so its
hostname is the SlurmctldHost), and one slurmd per namespace host of the ``nodes`` component's
kind, each entering its host's network, UTS and mount namespaces: every node has its own
hostname, resolves the others' names and sees its replayed /dev/nvidia*, as on a site.
GPU GRES come from the hosts' GPU profiles; the partitions are the ones the baremetal-c4140
inventory example submits to. Clients find the cluster with ``SLURM_CONF``; the lab's inventory
carries it (training.slurm_conf). Needs root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput, Unreachable
from gpuready.lab import Component, Lab, stop_pids, wait_for_port
from gpuready.lab import nodes as lab_nodes

DEFAULT_PROFILES = "v100-x4,v100-x4"
#: the partition inventories/baremetal-c4140 submits to (training.slurm_partition); the lab's default
PARTITION = "gpu"
TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "nsenter", "unshare")
PACKAGES = "slurmctld slurmd slurm-client munge"

SLURM_CONF = """# Slurm configuration of the gpuready lab {name}: written by `gpuready lab up`. Not a real site.
# Keys as in slurm.conf(5) of Slurm 22.05 (Debian bookworm's slurm-wlm).
ClusterName={cluster}
SlurmctldHost={controller}({controller_address})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
# no cgroups here (they belong to the machine, not to the lab): processes are tracked by their parents
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# finished jobs stay in slurmctld for `scontrol show job` (no accounting database in the lab)
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc={root}/log/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
{node_lines}
PartitionName={partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

START_SLURMD = """#!/bin/sh
# Runs in the host's network and UTS namespaces (its hostname) and a copy of its mount namespace (its
# /dev, its /etc/hosts). `ip netns exec` remounted /sys without the cgroup tree slurmd's cgroup/v1
# plugin looks for; an empty one is enough, since nothing here is constrained by cgroups.
set -e
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
exec slurmd -D -f {conf} -N {name}
"""


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _gpu_devices(profile: str) -> list[str]:
    """The /dev/nvidiaN the host's profile creates (a missing GPU is missing here too)."""
    from gpuready.lab import replay

    names = [n for n, *_ in replay.devices(replay.PROFILES[profile])]
    return [f"/dev/{n}" for n in names if n.removeprefix("nvidia").isdigit()]


def write_config(root: Path, state: dict[str, Any], partition: str) -> Path:
    """slurm.conf and gres.conf for the hosts in ``state``; returns slurm.conf's path."""
    cpus = os.cpu_count() or 1
    node_lines, gres_lines = [], []
    for host in state["hosts"]:
        devices = _gpu_devices(host["profile"])
        gres = f" Gres=gpu:{len(devices)}" if devices else ""
        node_lines.append(f"NodeName={host['name']} NodeAddr={host['address']} CPUs={cpus}{gres} State=UNKNOWN")
        for device in devices:
            gres_lines.append(f"NodeName={host['name']} Name=gpu File={device}")
    conf = root / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            name=state["cluster"],
            cluster=state["cluster"],
            controller=state["controller"],
            controller_address=state["controller_address"],
            ctld_port=state["ctld_port"],
            slurmd_port=state["slurmd_port"],
            munge_socket=state["munge_socket"],
            root=root,
            node_lines="\n".join(node_lines),
            partition=partition,
        )
    )
    (root / "cgroup.conf").write_text(
        "# cgroups are not used (proctrack/linuxproc, task/none)\nCgroupPlugin=cgroup/v1\n"
    )
    (root / "gres.conf").write_text(
        "# GPUs of the lab's hosts, from their GPU profiles\n" + "\n".join(gres_lines) + "\n"
    )
    return conf


def scontrol(conf: Path | str, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scontrol", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "SLURM_CONF": str(conf)},
    )


def wait_nodes_idle(conf: Path | str, names: list[str], timeout: float = 60) -> None:
    deadline, states = time.monotonic() + timeout, dict[str, str]()
    while time.monotonic() < deadline:
        out = scontrol(conf, "show", "node", "-o").stdout
        states = {}
        for line in out.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            states[fields.get("NodeName", "")] = fields.get("State", "")
        if all(states.get(n, "").startswith("IDLE") for n in names):
            return
        time.sleep(0.5)
    raise Unreachable(
        f"slurm: nodes not idle after {timeout:.0f}s: " + ", ".join(f"{n} {states.get(n) or 'unknown'}" for n in names)
    )


class SlurmLab(Component):
    name = "slurm"
    description = "a Slurm cluster (slurmctld, one slurmd per namespace host, munge) from Debian's packages"
    needs_root = True

    def up(self, lab: Lab, options: dict[str, str]) -> dict[str, Any]:
        from gpuready.lab import replay

        if os.geteuid() != 0:
            raise BadInput("lab component 'slurm' needs root (network namespaces); run it as root")
        unknown = set(options) - {"profiles", "prefix", "partition"}
        if unknown:
            raise BadInput(
                f"slurm: unknown option(s) {', '.join(sorted(unknown))} (known: profiles, prefix, partition)"
            )
        if missing := missing_tools():
            raise BadInput(f"slurm: missing {', '.join(missing)} (Debian: {PACKAGES}; run scripts/install-system-deps)")
        try:
            profiles = replay.profile_names(options.get("profiles", DEFAULT_PROFILES))
        except ValueError as e:
            raise BadInput(f"slurm.profiles: {e}") from e
        partition = options.get("partition", PARTITION)
        root = lab.component_dir(self.name)
        prefix = options.get("prefix", f"gs{os.getpid() % 100000}")
        state = lab_nodes.up_hosts(root, profiles, prefix, lambda argv: lab.spawn(self.name, argv))
        try:
            self._start(lab, root, state, partition)
            state["inventory"] = str(lab.write_inventory(self.name, *self._inventory(state, partition)))
        except BaseException:
            self.down(lab, state)
            raise
        return state

    def _start(self, lab: Lab, root: Path, state: dict[str, Any], partition: str) -> None:
        for sub in ("state", "spool", "run", "log", "munge"):
            shutil.rmtree(root / sub, ignore_errors=True)
            (root / sub).mkdir(parents=True)
        third = state["subnet"].split(".")[2]
        # unix socket paths are short (108 bytes): the socket lives under /run, the rest in the lab folder
        munge_dir = Path(f"/run/gpuready-munge-{state['prefix']}")
        shutil.rmtree(munge_dir, ignore_errors=True)
        munge_dir.mkdir(mode=0o755, parents=True)
        state.update(
            cluster=f"lab{state['prefix']}",
            controller=f"{state['prefix']}-ctl",
            controller_address=f"10.213.{third}.1",
            ctld_port=_free_port(),
            slurmd_port=6818,
            munge_dir=str(munge_dir),
            munge_socket=str(munge_dir / "munge.socket"),
        )
        key = root / "munge" / "munge.key"
        subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True, capture_output=True)
        state["pids"].append(
            lab.spawn(
                self.name,
                [
                    "munged",
                    "--foreground",
                    "--force",
                    f"--socket={state['munge_socket']}",
                    f"--key-file={key}",
                    f"--pid-file={root / 'munge' / 'munged.pid'}",
                    f"--seed-file={root / 'munge' / 'munged.seed'}",
                    f"--log-file={root / 'log' / 'munged.log'}",
                ],
            )
        )
        _wait_for_file(Path(state["munge_socket"]), 10, "munged")
        for host in state["hosts"]:
            (root / "spool" / host["name"]).mkdir()
        conf = write_config(root, state, partition)
        state["slurm_conf"] = str(conf)
        env = {"SLURM_CONF": str(conf)}
        state["pids"].append(
            lab.spawn(
                self.name,
                ["unshare", "--uts", "sh", "-c", f"hostname {state['controller']} && exec slurmctld -D -i -f {conf}"],
                env=env,
            )
        )
        wait_for_port(state["controller_address"], state["ctld_port"], timeout=30)
        for host in state["hosts"]:
            script = root / "hosts" / host["name"] / "slurmd.sh"
            script.write_text(START_SLURMD.format(name=host["name"], conf=conf))
            state["pids"].append(
                lab.spawn(
                    self.name,
                    [
                        "nsenter",
                        "-t",
                        str(host["pid"]),
                        "-n",
                        "-m",
                        "-u",
                        # the host's PID namespace too: its /proc is that namespace's (the host's pid is unshare's,
                        # whose children are in it)
                        f"--pid=/proc/{host['pid']}/ns/pid_for_children",
                        "unshare",
                        "--mount",
                        "--propagation",
                        "private",
                        "sh",
                        str(script),
                    ],
                    env=env,
                )
            )
        wait_nodes_idle(conf, [h["name"] for h in state["hosts"]])

    @staticmethod
    def _inventory(state: dict[str, Any], partition: str) -> tuple[dict[str, Any], dict[str, Any]]:
        from gpuready.lab import replay

        hosts = lab_nodes.inventory_hosts(state)
        settings = replay.lab_settings()
        # The hosts' GPUs are replayed recordings, so the workers train on CPU: one per host spreads a
        # two-worker job over two nodes, which is what the lab is for.
        settings["training"] = {
            **settings.get("training", {}),
            "launcher": "slurm",
            "slurm_partition": partition,
            "slurm_conf": state["slurm_conf"],
            "workers_per_host": 1,
        }
        return hosts, settings

    def down(self, lab: Lab, state: dict[str, Any]) -> None:
        # slurmds and slurmctld first (they hold jobs), then munged, then the hosts' sshds and namespaces
        host_pids = {int(h["pid"]) for h in state.get("hosts", [])}
        stop_pids([int(p) for p in state.get("pids", []) if int(p) not in host_pids], grace=5)
        # slurmstepd and job tasks leave slurmd's session, but not its host's network namespace
        for ns in state.get("namespaces", []):
            left = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False).stdout
            stray = [int(p) for p in left.split() if int(p) not in host_pids]
            for pid in stray:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        lab_nodes.down_hosts(state)
        if state.get("munge_dir"):
            shutil.rmtree(state["munge_dir"], ignore_errors=True)

    def usage(self, lab: Lab, state: dict[str, Any]) -> list[str]:
        inventory = state.get("inventory", "?")
        return [
            f"# a Slurm cluster of {len(state.get('hosts', []))} simulated GPU nodes (Debian's slurm-wlm):",
            f"export SLURM_CONF={state.get('slurm_conf', '?')}   # for sinfo, squeue, sbatch",
            # the hosts' GPUs are replayed: the workers train on the CPU, which --cpu says on purpose; a small
            # model and images keep a try of the launcher to a few minutes on a small machine
            f"gpuready validate training -i {inventory} --cpu --gpus 2 --model resnet50 --steps 3 --warmup-steps 1 "
            "--image-size 32 --batch-size 4   # a small CPU run across two nodes through sbatch",
            f"gpuready validate gpu-node -i {inventory}",
        ]

    def status(self, lab: Lab, state: dict[str, Any]) -> str:
        return f"{len(state.get('hosts', []))} nodes, SLURM_CONF={state.get('slurm_conf', '?')}; " + super().status(
            lab, state
        )


def _wait_for_file(path: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise Unreachable(f"{what} did not create {path} in {timeout:.0f}s")
        time.sleep(0.1)
