"""The lab: local simulators standing in for a GPU site, each plainly labelled simulated.

A component (a Kubernetes control plane with kwok nodes, vcsim, SSH hosts in network namespaces) starts
detached processes, waits until they answer, and writes an inventory of its own under
the lab folder, so every gpuready command can be pointed at it.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from gpuready.core import cancel
from gpuready.core.errors import BadInput, Unreachable

COMPONENTS = {
    "kubernetes": "gpuready.lab.kubernetes:KubernetesLab",
    "vsphere": "gpuready.lab.vsphere:VsphereLab",
    "nodes": "gpuready.lab.nodes:NodesLab",
    "slurm": "gpuready.lab.slurm:SlurmLab",
}
DEFAULT_DIR = Path("gpuready-lab")


def cache_dir() -> Path:
    """Where the lab keeps what it builds (Go binaries, Debian roots): the user's cache dir, as the XDG Base
    Directory specification says, never the source tree or the installed package."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuready"


class Lab:
    """The lab folder: one sub-folder per component, and state.json recording what runs."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root or os.environ.get("GPUREADY_LAB_DIR") or DEFAULT_DIR).resolve()
        #: Pids started per component by this process, so a start that fails or is cancelled is undone.
        self.spawned: dict[str, list[int]] = {}

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def component_dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def inventory_dir(self, name: str) -> Path:
        return self.component_dir(name) / "inventory"

    def spawn(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        cwd: Path | str | None = None,
        log: Path | None = None,
        component: str | None = None,
    ) -> int:
        """Start a detached process (own session, so `lab down` can stop all it started), recorded at once in
        ``<component>/pids``: a `lab up` killed before it writes state.json still leaves a record to stop."""
        log = log or self.component_dir(name) / f"{name}.log"
        owner = component or name
        record = self.component_dir(owner) / "pids"
        # Ctrl-C waits until the child is recorded, so whoever undoes the start knows about it.
        with cancel.held(), log.open("ab") as out:
            try:
                process = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **(env or {})},
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as e:
                raise Unreachable(f"lab {name}: cannot start {argv[0]}: {e.strerror}") from e
            with record.open("a") as pids:
                pids.write(f"{process.pid} {start_time(process.pid)}\n")
            self.spawned.setdefault(owner, []).append(process.pid)
        return process.pid

    def recorded(self, component: str) -> list[int]:
        """The processes ``component`` started that still run, in start order. A pid the kernel has since
        given to another process (its start time differs from the recorded one) is not ours and left alone."""
        path = self.root / component / "pids"
        try:
            lines = path.read_text().split("\n")
        except (FileNotFoundError, NotADirectoryError):
            return []
        pids = []
        for line in lines:
            fields = line.split()
            if not fields or not fields[0].isdigit():
                continue
            pid = int(fields[0])
            started = start_time(pid)
            if started and (len(fields) < 2 or fields[1] == started) and pid not in pids:
                pids.append(pid)
        return pids

    def write_inventory(self, name: str, hosts: dict[str, Any], settings: dict[str, Any]) -> Path:
        """hosts.yml and group_vars/all/gpuready.yml. Hosts reached with the local connection run modules with
        the Python gpuready runs in, as inventories/local does: Ansible's interpreter discovery can pick another
        python (a pyenv shim, say) that lacks gpuready's libraries and fails in ansible.legacy.setup."""
        for group in hosts.values():
            for variables in (group.get("hosts") or {}).values():
                if isinstance(variables, dict) and variables.get("ansible_connection") == "local":
                    variables.setdefault("ansible_python_interpreter", "{{ ansible_playbook_python }}")
        folder = self.inventory_dir(name)
        (folder / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
        header = f"# Simulated lab ({name}), written by `gpuready lab up`. Not a real site.\n"
        (folder / "hosts.yml").write_text(header + yaml.safe_dump(hosts, sort_keys=False))
        (folder / "group_vars" / "all" / "gpuready.yml").write_text(
            header + yaml.safe_dump({"gpuready": settings}, sort_keys=False)
        )
        return folder

    def load_state(self) -> dict[str, dict[str, Any]]:
        if self.root.exists() and not self.root.is_dir():
            raise BadInput(f"--lab-dir {self.root}: not a folder")
        try:
            state: dict[str, dict[str, Any]] = json.loads(self.state_file.read_text())
            return state
        except FileNotFoundError:
            return {}
        except NotADirectoryError:
            raise BadInput(f"--lab-dir {self.root}: a parent of it is a file, not a folder") from None
        except OSError as e:
            raise BadInput(f"{self.state_file}: cannot read: {e.strerror}") from None
        except ValueError as e:
            raise BadInput(f"{self.state_file}: unreadable lab state ({e}); remove the lab folder") from e

    def save_state(self, state: dict[str, dict[str, Any]]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(state, indent=2) + "\n")


def wait_for_port(host: str, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError as e:
            if time.monotonic() > deadline:
                raise Unreachable(f"nothing answers on {host}:{port} after {timeout:.0f}s") from e
            time.sleep(0.1)


def start_time(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat); "" when it no longer runs (or is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()
    return "" if fields[0] == "Z" else fields[19]


def process_name(pid: int) -> str:
    """The program ``pid`` runs: its name (/proc/PID/comm), whole where the kernel cut it at 15 characters
    (kube-controller-manager), the module of ``python -m MODULE``, or "?" when it is gone."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
    if len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    # A program may rewrite its command line (sshd shows its state there): argv[0] only lengthens a cut name.
    whole = Path(argv[0].split(" ", 1)[0]).name
    return whole if len(comm) == 15 and whole.startswith(comm) else comm or "?"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie does not: it has exited and waits for its parent (init, for the
    lab's detached processes) to reap it, which some inits do only every few seconds."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(start_time(pid)) or not Path(f"/proc/{pid}").exists()


def stop_in_reverse(pids: list[int], grace: float = 10.0) -> None:
    """Stop processes one at a time, the last started first: what depends on a process (kube-apiserver on
    etcd) is stopped while that process still answers, so it shuts down on SIGTERM instead of retrying."""
    for pid in reversed(pids):
        stop_pids([pid], grace)


def stop_pids(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM each process's session, then SIGKILL what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue
        deadline = time.monotonic() + grace
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            _reap()
            time.sleep(0.05)
        _reap()
        if not any(pid_alive(p) for p in pids):
            return


def _reap() -> None:
    # Children spawned by this very process (tests) stay zombies, and so "alive", until reaped.
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


class Component:
    """A lab component. Subclasses start processes in ``up`` and return their state."""

    name = ""
    description = ""
    needs_root = False

    def check(self, options: dict[str, str]) -> None:
        """Refuse bad options before any component starts (subclasses check theirs)."""

    def up(self, lab: Lab, options: dict[str, str]) -> dict[str, Any]:
        raise NotImplementedError

    def build(self) -> list[Path]:
        """Build (or find cached) what the component runs; the folders it uses. Nothing to build by default."""
        return []

    def down(self, lab: Lab, state: dict[str, Any]) -> None:
        recorded = lab.recorded(self.name)
        pids = [int(p) for p in state.get("pids", []) if int(p) in recorded or not recorded]
        stop_in_reverse(pids + [p for p in recorded if p not in pids])
        (lab.root / self.name / "pids").unlink(missing_ok=True)

    def stopping(self, lab: Lab, state: dict[str, Any]) -> str:
        """What :meth:`down` stops, for the line `lab down` prints first: its processes by name, and the
        network namespaces it removes."""
        pids = list(dict.fromkeys([*(int(p) for p in state.get("pids", [])), *lab.recorded(self.name)]))
        names: dict[str, int] = {}
        for pid in pids:
            if start_time(pid):
                name = process_name(pid)
                names[name] = names.get(name, 0) + 1
        alive = sum(names.values())
        what = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in names.items())
        parts = [f"{alive} process(es) ({what})" if alive else "no running process"]
        if namespaces := state.get("namespaces"):
            parts.append(f"{len(namespaces)} network namespace(s)")
        return " and ".join(parts)

    def leftovers(self, lab: Lab) -> list[int]:
        """Processes recorded in <component>/pids that still run (of a ``lab up`` that never finished)."""
        return lab.recorded(self.name)

    def usage(self, lab: Lab, state: dict[str, Any]) -> list[str]:
        """What a user does with the running component: shell lines, printed by `lab up`."""
        return [f"gpuready inventory check -i {state.get('inventory', '?')}"]

    def status(self, lab: Lab, state: dict[str, Any]) -> str:
        pids = [int(p) for p in state.get("pids", [])]
        alive = [p for p in pids if pid_alive(p)]
        if pids and len(alive) == len(pids):
            return f"running (pids {', '.join(map(str, pids))}); inventory {state.get('inventory', '?')}"
        return f"stopped ({len(alive)}/{len(pids)} processes alive)"


def component(name: str) -> Component:
    if name not in COMPONENTS:
        raise BadInput(f"unknown lab component {name!r} (known: {', '.join(COMPONENTS)})")
    module, attribute = COMPONENTS[name].split(":")
    try:
        cls = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as e:
        raise BadInput(f"lab component {name!r} is not available in this build ({e})") from e
    component: Component = cls()
    return component
