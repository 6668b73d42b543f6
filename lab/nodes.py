"""Lab component ``nodes``: simulated GPU nodes, each a network namespace running its own sshd.

Each host gets a veth on a private bridge (10.213.S.0/24, S chosen unused), its own mount
namespace with a tmpfs /dev holding the profile's /dev/nvidia* (SELinux labels as xattrs), and a
PATH whose ``nvidia-smi`` and friends replay recorded outputs (gpuready.lab.replay).
Everything is reached by real SSH, exactly as a real site would be. Needs root.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput, Unreachable
from gpuready.lab import Component, Lab, stop_pids, wait_for_port

DEFAULT_PROFILES = (
    "v100-x4,a100-x4,h100-x8,ecc-errors,driver-mismatch,missing-gpu,nouveau,nvlink-down,selinux-label,throttle,"
    "slow-gpu,busy-gpu"
)
TOOLS = ("ip", "unshare", "setfattr", "ssh-keygen", "/usr/sbin/sshd", "mknod")
MAX_HOSTS = 200
#: The line of the lab's hosts file after which its own hosts are listed, one "address name" per line.
HOSTS_MARK = "# gpuready lab hosts\n"

START = """#!/bin/sh
# Runs inside the host's network namespace and its own mount, UTS and PID namespaces: its own hostname
# (resolved by every lab host, as on a site), a private /dev, then sshd.
set -e
H={home}
hostname {name}
mount --bind {hosts_file} /etc/hosts
mkdir -p "$H/realdev" /run/sshd
mount --rbind /dev "$H/realdev"
mount -t tmpfs -o mode=755 tmpfs /dev
for f in null zero random urandom tty full; do touch "/dev/$f"; mount --bind "$H/realdev/$f" "/dev/$f"; done
mkdir /dev/pts && mount --rbind "$H/realdev/pts" /dev/pts && ln -s pts/ptmx /dev/ptmx
# POSIX semaphores and shared memory (Python's multiprocessing, horovodrun) live in /dev/shm
mkdir /dev/shm && mount -t tmpfs -o mode=1777 shm /dev/shm
umount -l "$H/realdev"
# The login shell starts as on a freshly installed Debian node: root's startup files are Debian's own
# (base-files), not this machine's, whose additions (a pyenv set-up, say) would run at every SSH session
# and weigh on every tool measured against these hosts.
for f in bashrc profile; do
  D=/usr/share/base-files/dot.$f
  if [ -f "$D" ] && [ -f /root/.$f ]; then mount --bind "$D" /root/.$f; fi
done
sh "$H/devices.sh"
# A host, not a container, to the checks' container test (validate/node/checks/commands.py, CONTAINER_COMMAND):
# sshd is PID 1 of the host's own PID namespace, as a host's init is (so its sessions share PID 1's mount
# namespace), and the marker of the container this machine may itself be is masked with a device node.
for f in /.dockerenv /run/.containerenv; do if [ -f "$f" ]; then mount --bind /dev/null "$f"; fi; done
exec /usr/sbin/sshd -D -e -f "$H/sshd_config"
"""

SSHD_CONFIG = """# sshd of simulated GPU node {name} ({profile}); written by gpuready lab nodes.
ListenAddress {address}
Port 22
HostKey {keys}/host_ed25519
PidFile {home}/sshd.pid
AuthorizedKeysFile {keys}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100:30:200
# The replayed tools come first, so nvidia-smi and friends answer with the profile's recordings.
SetEnv PATH={home}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Unreachable(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _free_subnet() -> int:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False).stdout
    start = os.getpid() % 150  # parallel runs (other pids) start their search elsewhere
    for k in range(150):
        third = 100 + (start + k) % 150
        if f" 10.213.{third}." not in used:
            return third
    raise Unreachable("no free 10.213.x.0/24 subnet for the lab nodes")


def check_prefix(prefix: str) -> None:
    """The prefix names the bridge, veths and namespaces: Linux interface names are short and plain."""
    if len(prefix) > 8:
        raise BadInput(f"nodes: prefix {prefix!r} longer than 8 characters (interface names are short)")
    if not re.fullmatch(r"[a-z][a-z0-9]*", prefix):
        raise BadInput(
            f"nodes: prefix {prefix!r}: lower-case letters and digits only, starting with a letter "
            "(it names network interfaces and namespaces)"
        )


def up_hosts(root: Path, profiles: list[str], prefix: str, spawn: Callable[[list[str]], int]) -> dict[str, Any]:
    """Start one namespace host per profile; returns the state (hosts, pids, bridge, namespaces, key)."""
    from gpuready.lab import replay

    if not profiles:
        raise BadInput("nodes: no profile given")
    if len(profiles) > MAX_HOSTS:
        raise BadInput(f"nodes: {len(profiles)} hosts asked, at most {MAX_HOSTS}")
    check_prefix(prefix)
    if missing := missing_tools():
        raise BadInput(f"nodes: missing tools {', '.join(missing)} (run scripts/install-system-deps)")
    keys = root / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    for name in ("id_ed25519", "host_ed25519"):
        if not (keys / name).exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpuready-lab-{name}", "-f", str(keys / name)],
                check=True,
                capture_output=True,
            )
    (keys / "authorized_keys").write_text((keys / "id_ed25519.pub").read_text())
    third = _free_subnet()
    names = [(f"{profile}-{i:02d}", f"10.213.{third}.{10 + i}") for i, profile in enumerate(profiles)]
    hosts_file = root / "etc-hosts"
    hosts_file.write_text(
        Path("/etc/hosts").read_text() + "\n" + HOSTS_MARK + "".join(f"{address} {name}\n" for name, address in names)
    )
    state: dict[str, Any] = {
        "prefix": prefix,
        "bridge": f"{prefix}br",
        "subnet": f"10.213.{third}.0/24",
        "namespaces": [],
        "hosts": [],
        "pids": [],
        "key": str(keys / "id_ed25519"),
    }
    try:
        _ip("link", "add", state["bridge"], "type", "bridge")
        _ip("addr", "add", f"10.213.{third}.1/24", "dev", state["bridge"])
        _ip("link", "set", state["bridge"], "up")
        for i, profile in enumerate(profiles):
            (name, address), ns = names[i], f"{prefix}-{i}"
            home = root / "hosts" / name
            shutil.rmtree(home, ignore_errors=True)
            replay.build(profile, home)
            (home / "sshd_config").write_text(
                SSHD_CONFIG.format(name=name, profile=profile, address=address, keys=keys, home=home)
            )
            (home / "start.sh").write_text(START.format(home=home, name=name, hosts_file=hosts_file))
            # Noted before it exists: a cancel that lands while `ip` runs must still find it to delete.
            state["namespaces"].append(ns)
            _ip("netns", "add", ns)
            veth = f"{prefix}v{i}"
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", state["bridge"], "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            pid = spawn(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "unshare",
                    "--mount",
                    "--uts",
                    # The host's own PID namespace and /proc: start.sh's sshd is its PID 1 (the spawned pid is
                    # unshare's, in the host's mount namespace, waiting for it; `lab down` names it so).
                    "--pid",
                    "--fork",
                    "--mount-proc",
                    "--propagation",
                    "private",
                    "sh",
                    str(home / "start.sh"),
                ]
            )
            state["pids"].append(pid)
            state["hosts"].append(
                {"name": name, "profile": profile, "namespace": ns, "address": address, "pid": pid, "home": str(home)}
            )
        for host in state["hosts"]:
            wait_for_port(host["address"], 22, timeout=20)
    except BaseException:
        down_hosts(state)
        raise
    state["hosts_file"] = str(hosts_file)
    return state


def down_hosts(state: dict[str, Any]) -> None:
    """Stop the sshds, delete the namespaces (their veths go with them) and the bridge."""
    stop_pids([int(p) for p in state.get("pids", [])], grace=3)
    for i, ns in enumerate(state.get("namespaces", [])):
        _kill_namespace(ns)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        # The veth goes with its namespace only once the last process in it has exited: delete it now, so
        # the same names can be used again at once.
        subprocess.run(["ip", "link", "del", f"{state['prefix']}v{i}"], capture_output=True, check=False)
    if state.get("bridge"):
        subprocess.run(["ip", "link", "del", state["bridge"]], capture_output=True, check=False)


def _kill_namespace(ns: str, grace: float = 3.0) -> None:
    """Kill whatever still runs in the namespace: a host whose start a cancel interrupted after its
    process was forked but before its pid was noted is known by its namespace alone."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        listed = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
        pids = [int(p) for p in listed.stdout.split() if p.isdigit()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def inventory_hosts(state: dict[str, Any]) -> dict[str, Any]:
    from gpuready.lab import replay

    # The lab makes new host keys for new hosts: like Ansible with host_key_checking off for them.
    hosts = {
        h["name"]: {
            "ansible_host": h["address"],
            "ansible_port": 22,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": state["key"],
            "ansible_host_key_checking": False,
            "gpuready_node_class": replay.PROFILES[h["profile"]].node_class,
            # preflight reads the host's replayed PCI bus and kernel headers: the hosts share this machine's
            # /sys and /lib/modules
            "preflight_pci_devices": f"{h['home']}/data/pci",
            "preflight_kernel_modules": f"{h['home']}/data/modules",
            # The recordings replayed were made on branch 535, which NVIDIA has retired; the lab installs no driver.
            "nvidia_driver_allow_end_of_life": True,
        }
        for h in state["hosts"]
    }
    return {"gpu_nodes": {"hosts": hosts}}


def write_inventory(folder: Path, state: dict[str, Any]) -> Path:
    """An inventory of the hosts (for tests; the lab uses Lab.write_inventory)."""
    import yaml

    from gpuready.lab import replay

    (folder / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (folder / "hosts.yml").write_text(yaml.safe_dump(inventory_hosts(state), sort_keys=False))
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(
        yaml.safe_dump({"gpuready": replay.lab_settings()}, sort_keys=False)
    )
    return folder


class NodesLab(Component):
    name = "nodes"
    description = "simulated GPU nodes: network namespaces with sshd, nvidia-smi replaying recorded profiles"
    needs_root = True

    def check(self, options: dict[str, str]) -> None:
        from gpuready.lab import replay

        unknown = set(options) - {"profiles", "prefix"}
        if unknown:
            raise BadInput(f"nodes: unknown option(s) {', '.join(sorted(unknown))} (known: profiles, prefix)")
        try:
            replay.profile_names(options.get("profiles", DEFAULT_PROFILES))
        except ValueError as e:
            raise BadInput(f"nodes.profiles: {e}") from e
        if "prefix" in options:
            check_prefix(options["prefix"])

    def up(self, lab: Lab, options: dict[str, str]) -> dict[str, Any]:
        from gpuready.lab import replay

        if os.geteuid() != 0:
            raise BadInput("lab component 'nodes' needs root (network namespaces); run it as root")
        self.check(options)
        profiles = replay.profile_names(options.get("profiles", DEFAULT_PROFILES))
        prefix = options.get("prefix", f"gl{os.getpid() % 100000}")
        state = up_hosts(lab.component_dir(self.name), profiles, prefix, lambda argv: lab.spawn(self.name, argv))
        state["inventory"] = str(lab.write_inventory(self.name, inventory_hosts(state), replay.lab_settings()))
        return state

    def down(self, lab: Lab, state: dict[str, Any]) -> None:
        down_hosts(state)

    def usage(self, lab: Lab, state: dict[str, Any]) -> list[str]:
        inventory = state.get("inventory", "?")
        from gpuready.lab import replay
        from gpuready.validate.node.node import QUERY_COMMAND

        hosts = state.get("hosts") or [{"name": "?", "address": "?", "profile": "?"}]
        # a host whose nvidia-smi answers: a nouveau host's fails, as a real one does
        answering = [h for h in hosts if h["profile"] in replay.PROFILES and not replay.PROFILES[h["profile"]].nouveau]
        host = (answering or hosts)[0]
        ssh = f"ssh -i {state.get('key')} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
        return [
            f"# {len(state.get('hosts', []))} simulated GPU nodes over SSH (key {state.get('key')}):",
            f"gpuready validate gpu-node -i {inventory}",
            f"gpuready provision cluster -i {inventory} --tags preflight --check   # preflight only; changes nothing",
            f"{ssh} root@{host['address']} {shlex.quote(QUERY_COMMAND)}   # {host['name']}: its replayed nvidia-smi",
        ]

    def status(self, lab: Lab, state: dict[str, Any]) -> str:
        return f"{len(state.get('hosts', []))} hosts on {state.get('subnet', '?')}; " + super().status(lab, state)
