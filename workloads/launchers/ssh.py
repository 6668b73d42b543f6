"""SSH launcher: horovodrun (Gloo, started on the first host) or mpirun (from this machine) across the
inventory's GPU hosts; for PyTorch, one torchrun per host over SSH, meeting at the first host (c10d).

Every host must have this Python (same path) with gpuready[train] installed, as horovodrun and
mpirun expect, and accept the inventory's SSH key (ansible_ssh_private_key_file; on the nodes
themselves the mpi_ssh role's key in ~/.ssh/config). A host is reached from here as ``validate gpu-node``
reaches it: the same connection spec (gpuready.core.inventory.connection), jump hosts (ProxyJump,
ProxyCommand in ansible_ssh_common_args/extra_args) included. Every chosen host is tried over SSH before
anything starts: one that does not answer stops the run, named (exit 3).

With mpirun, OpenMPI starts the processes and Horovod's collectives run over Gloo, whose
rendezvous this launcher serves (gpuready.workloads.launchers.rendezvous): the Horovod that `make` builds
has no MPI. A Horovod built with MPI runs the same command line.

A process started over SSH without a terminal does not die with the ssh client that started it (sshd
sends SIGHUP only to a terminal's processes), so every process a launch starts carries the variable
GPUREADY_LAUNCH with the launch's own token, and Ctrl-C, SIGTERM or a timeout ends, on each chosen host,
every process that carries it (terminate, a bounded wait, then kill).
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput, Unreachable
from gpuready.core.inventory import connection
from gpuready.workloads.launchers import (
    RENDEZVOUS_PORT,
    TRAIN_MODULE,
    Launch,
    Plan,
    horovodrun,
    rendezvous,
    torchrun_args,
    worker_env,
)


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    slots: int
    user: str = ""
    key: str = ""
    port: int = 22
    #: the inventory's own ssh arguments (ansible_ssh_common_args, ansible_ssh_extra_args): a jump host
    extra: tuple[str, ...] = ()
    host_key_checking: bool = True

    @classmethod
    def from_spec(cls, spec: dict[str, Any], slots: int) -> Host:
        """The host as :func:`gpuready.core.inventory.connection.connection_spec` read it from the inventory (the
        workers run as the login user, as horovodrun and mpirun start them: ansible_become is not theirs)."""
        if spec["connection"] != "ssh":
            raise BadInput(f"host {spec['name']}: --launcher ssh reaches hosts over ssh, not {spec['connection']}")
        return cls(
            spec["name"],
            spec["address"],
            slots,
            spec["user"],
            spec["key"],
            spec["port"],
            tuple(spec["extra"]),
            spec["host_key_checking"],
        )

    @property
    def spec(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connection": "ssh",
            "address": self.address,
            "port": self.port,
            "user": self.user,
            "key": self.key,
            "extra": list(self.extra),
            "host_key_checking": self.host_key_checking,
            "become_user": "",
        }


def host_slots(hosts: list[Host], workers: int) -> list[tuple[Host, int]]:
    """Fill whole hosts first, one worker per slot (GPU): the fewest hosts, so most traffic stays on NVLink."""
    chosen, left = [], workers
    for host in hosts:
        if left <= 0:
            break
        take = min(host.slots, left)
        if take:
            chosen.append((host, take))
            left -= take
    if left > 0:
        total = sum(h.slots for h in hosts)
        raise BadInput(f"{workers} workers need {workers} slots (one per GPU); the inventory's hosts have {total}")
    return chosen


#: seconds an ssh connection may take to come up
CONNECT_TIMEOUT_S = 10


def ssh_options(host: Host, known_hosts: Path) -> list[str]:
    # First contact is trusted and recorded in the run's own known_hosts: the launcher never edits ~/.ssh.
    return connection.ssh_options(host.spec, CONNECT_TIMEOUT_S, known_hosts)


def mpirun_rsh_args(chosen: list[tuple[Host, int]], known_hosts: Path) -> str:
    """The ssh options mpirun's ssh gets for every host (``-mca plm_rsh_args``): one string for all of them,
    which OpenMPI splits at blanks into ssh's arguments, so the hosts must share them and none may hold a blank."""
    options = {name: ssh_options(host, known_hosts) for name, host in ((h.name, h) for h, _ in chosen)}
    first, *others = options
    for name in others:
        if options[name] != options[first]:
            raise BadInput(
                f"hosts {first} and {name} are reached with different ssh settings (user, port, key, ssh args): "
                "mpirun gives every host the same ones; use --ssh-runner horovodrun or one setting for all"
            )
    spaced = next((arg for arg in options[first] if any(c.isspace() for c in arg)), None)
    if spaced is not None:
        raise BadInput(
            f"host {first}: ssh argument {spaced!r} has a blank, which mpirun's plm_rsh_args cannot carry "
            "(it splits at blanks): write the jump host as -o ProxyJump=host, or use --ssh-runner horovodrun"
        )
    return " ".join(options[first])


#: Marks every process of one launch, on every host (see the module's docstring).
LAUNCH_VAR = "GPUREADY_LAUNCH"
#: On a host: the processes whose environment holds the mark (GNU grep reads each environ as NUL-separated
#: lines); SIGTERM, up to STOP_GRACE_S for them to end, then SIGKILL.
STOP_GRACE_S = 10
_STOP_SCRIPT = """mine() {{ grep -lzxF -- {mark} /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }}
pids=$(mine); [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
n=0; while [ -n "$pids" ] && [ $n -lt {rounds} ]; do sleep 0.5; pids=$(mine); n=$((n+1)); done
[ -n "$pids" ] && kill -KILL $pids 2>/dev/null; true"""


def launch_mark() -> str:
    """``GPUREADY_LAUNCH=<token>``, new for each launch."""
    return f"{LAUNCH_VAR}={uuid.uuid4().hex}"


def stop_command(mark: str) -> str:
    """The shell command that ends, where it runs, every process whose environment holds ``mark``."""
    return shlex.join(["sh", "-c", _STOP_SCRIPT.format(mark=shlex.quote(mark), rounds=STOP_GRACE_S * 2)])


def stop_remote(hosts: list[Host], known_hosts: Path, mark: str) -> None:
    """End every process of the launch ``mark`` on each host (best effort: a host that does not answer is
    left, as it would be by any other way of stopping)."""
    for host in hosts:
        try:
            _ssh(host, known_hosts, stop_command(mark))
        except (OSError, subprocess.TimeoutExpired):
            continue


def check_reachable(chosen: list[tuple[Host, int]], known_hosts: Path) -> None:
    """Each host answers `true` over SSH, or the run stops before it starts, naming the host."""
    for host, _ in chosen:
        try:
            done = _ssh(host, known_hosts, "true")
        except subprocess.TimeoutExpired:
            raise Unreachable(f"host {host.name} ({host.address}) did not answer over SSH in 30s") from None
        if done.returncode:
            why = " ".join(done.stderr.split()) or f"exit {done.returncode}"
            raise Unreachable(f"host {host.name} ({host.address}) unreachable over SSH: {why}")


def _ssh(host: Host, known_hosts: Path, *remote: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", *ssh_options(host, known_hosts), host.address, *remote],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def interface_towards(host: Host, peer: str, known_hosts: Path) -> str:
    """The network interface ``host`` reaches ``peer`` through (`ip route get` on the host itself)."""
    route = _ssh(host, known_hosts, "ip", "-o", "route", "get", peer).stdout.split()
    return route[route.index("dev") + 1] if "dev" in route else ""


def command(
    plan: Plan,
    workers: int,
    hosts: list[Host],
    runner: str,
    known_hosts: Path,
    python: str = "",
    interface: str = "",
    mark: str = "",
) -> list[str]:
    chosen = host_slots(hosts, workers)
    slots = ",".join(f"{h.address}:{n}" for h, n in chosen)
    train = [python or sys.executable, *TRAIN_MODULE, *plan.train_args()]
    first = chosen[0][0]
    if runner == "mpirun":
        rsh = mpirun_rsh_args(chosen, known_hosts)
        cmd = [
            "mpirun",
            "--map-by",
            "socket",
            "-np",
            str(workers),
            "-H",
            slots,
            "-bind-to",
            "none",
            "-mca",
            "plm_rsh_args",
            rsh,
            "-x",
            "PATH",
            "-x",
            "TF_CPP_MIN_LOG_LEVEL=1",
            "-x",
            "PYTHONUNBUFFERED=1",
            "-x",
            "NCCL_DEBUG=WARN",
        ]
        exported = (rendezvous.ADDR, rendezvous.PORT, rendezvous.HOSTS, *([LAUNCH_VAR] if mark else []))
        cmd += [a for v in exported for a in ("-x", v)]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
        return [*cmd, python or sys.executable, "-m", rendezvous.MODULE, "worker", "--", *train]
    # horovodrun runs on the first host, as on a site: its driver must share a network interface name
    # with the workers (Gloo's HOROVOD_GLOO_IFACE), which this machine need not. The jump host, if any, is
    # this machine's way in to the first host; horovodrun's own ssh to its mates starts there, on their network.
    cmd = [horovodrun(), "-np", str(workers), "-H", slots, "--gloo", "-p", str(first.port)]
    if first.key:
        cmd += ["--ssh-identity-file", first.key]
    if interface:  # else Horovod may pick loopback, which every host has in common
        cmd += ["--network-interfaces", interface]
    return [
        "ssh",
        *ssh_options(first, known_hosts),
        first.address,
        "env",
        "TF_CPP_MIN_LOG_LEVEL=1",
        "PYTHONUNBUFFERED=1",
        *([mark] if mark else []),
        shlex.join([*cmd, *train]),
    ]


def torchrun_commands(
    plan: Plan, workers: int, hosts: list[Host], known_hosts: Path, python: str = "", mark: str = ""
) -> list[list[str]]:
    """One ssh command per host: torchrun with that host's workers, all meeting at the first host."""
    chosen = host_slots(hosts, workers)
    if len({n for _, n in chosen}) > 1:
        raise BadInput(
            f"{workers} workers land on hosts as {[n for _, n in chosen]}: torchrun wants the same "
            "number of workers on every host (choose a multiple of the GPUs per host)"
        )
    endpoint, per_node = f"{chosen[0][0].address}:{RENDEZVOUS_PORT}", chosen[0][1]
    train = [
        python or sys.executable,
        "-m",
        "torch.distributed.run",
        *torchrun_args(len(chosen), per_node, endpoint, f"gpuready-{workers}w"),
        *plan.module,
        *plan.train_args(),
    ]
    return [
        [
            "ssh",
            *ssh_options(host, known_hosts),
            host.address,
            "env",
            "PYTHONUNBUFFERED=1",
            *([mark] if mark else []),
            shlex.join(train),
        ]
        for host, _ in chosen
    ]


def _mpirun_env(hosts: str, first_address: str) -> tuple[rendezvous.Rendezvous, dict[str, str]]:
    """Serve Horovod's rendezvous here, on the address the hosts reach us at; tell OpenMPI to use that network."""
    import psutil

    here = rendezvous.route_address(first_address)
    server = rendezvous.Rendezvous(hosts, here)
    iface = rendezvous.interface_of(here)
    net = next(
        str(ipaddress.ip_interface(f"{a.address}/{a.netmask}").network)
        for a in psutil.net_if_addrs()[iface]
        if a.address == here
    )
    # OMPI_MCA_* are OpenMPI's own environment form of -mca: its daemons call back on this network only
    return server, {**server.env, "OMPI_MCA_oob_tcp_if_include": net, "OMPI_MCA_btl_tcp_if_include": net}


def launch(plan: Plan, workers: int, folder: Path, hosts: list[Host], runner: str) -> Launch:
    if plan.framework == "pytorch":
        return _launch_torchrun(plan, workers, folder, hosts)
    if plan.distribution != "horovod":
        raise BadInput(f"--launcher ssh runs Horovod (horovodrun or mpirun), not {plan.distribution}")
    known_hosts = folder / "known_hosts"
    chosen = host_slots(hosts, workers)
    check_reachable(chosen, known_hosts)
    interface = ""
    if runner == "horovodrun" and len(chosen) > 1:
        interface = interface_towards(chosen[0][0], chosen[1][0].address, known_hosts)
    mark = launch_mark()
    cmd = command(plan, workers, hosts, runner, known_hosts, interface=interface, mark=mark)
    log_path = folder / f"workers-{workers}.log"
    result = Launch(workers, log=log_path)
    (folder / f"workers-{workers}.cmd").write_text(shlex.join(cmd) + "\n")
    server = None
    env = {**worker_env(), LAUNCH_VAR: mark.partition("=")[2]}
    try:
        if runner == "mpirun":
            server, extra = _mpirun_env(",".join(f"{h.address}:{n}" for h, n in chosen), chosen[0][0].address)
            env.update(extra)
        with log_path.open("w") as out:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=plan.timeout_s, check=False
            )
        result.returncode = proc.returncode
    except FileNotFoundError as e:
        raise Unreachable(
            f"{cmd[0]} not found on this machine: install it (Debian: openmpi-bin), or use --launcher slurm"
        ) from e
    except subprocess.TimeoutExpired:
        result.problem = f"stopped after {plan.timeout_s}s (timeout_s)"
        stop_remote([h for h, _ in chosen], known_hosts, mark)
    except BaseException:
        stop_remote([h for h, _ in chosen], known_hosts, mark)  # Ctrl-C, SIGTERM: nothing may go on running
        raise
    finally:
        if server:
            server.__exit__()
    return result.collect()


def _launch_torchrun(plan: Plan, workers: int, folder: Path, hosts: list[Host]) -> Launch:
    known_hosts = folder / "known_hosts"
    slots = host_slots(hosts, workers)
    check_reachable(slots, known_hosts)
    chosen = [h for h, _ in slots]
    mark = launch_mark()
    commands = torchrun_commands(plan, workers, hosts, known_hosts, mark=mark)
    log_path = folder / f"workers-{workers}.log"
    (folder / f"workers-{workers}.cmd").write_text("".join(shlex.join(c) + "\n" for c in commands))
    parts = [log_path.with_suffix(f".{i}.log") for i in range(len(commands))]
    procs = []
    codes: list[int] = []
    try:
        for cmd, part in zip(commands, parts, strict=True):
            with part.open("w") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=worker_env()))
        codes = [p.wait(timeout=plan.timeout_s) for p in procs]
    except FileNotFoundError as e:
        raise Unreachable("ssh not found on this machine: install openssh-client, or use --launcher slurm") from e
    except subprocess.TimeoutExpired:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if procs and len(codes) < len(procs):  # timeout, Ctrl-C or SIGTERM
            stop_remote(chosen, known_hosts, mark)
        log_path.write_text("".join(part.read_text(errors="replace") for part in parts if part.exists()))
        for part in parts:
            part.unlink(missing_ok=True)
    result = Launch(workers, log=log_path, returncode=max(codes, key=abs) if codes else None)
    if not codes:
        result.problem = f"stopped after {plan.timeout_s}s (timeout_s)"
    return result.collect()
