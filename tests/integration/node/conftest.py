"""Namespace GPU hosts for the node tests: one network namespace + sshd per replayed profile."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import require


def can_make_namespaces() -> bool:
    return (
        os.geteuid() == 0
        and shutil.which("ip") is not None
        and subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode == 0
    )


def start(root: Path, profiles: list[str], unreachable: bool = False) -> Iterator[dict[str, Any]]:
    """Hosts up, an inventory written; always torn down (namespaces, bridge, sshds)."""
    from gpuready.lab import nodes

    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    require(not nodes.missing_tools(), f"missing tools: {nodes.missing_tools()} (scripts/install-system-deps)")
    logs = root / "sshd.log"

    def spawn(argv: list[str]) -> int:
        with logs.open("ab") as out:
            return subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            ).pid

    prefix = f"gt{os.getpid() % 100000}"
    state = nodes.up_hosts(root, profiles, prefix, spawn)
    try:
        inventory = nodes.write_inventory(root / "inventory", state)
        if unreachable:
            # An address on the lab's own bridge where nothing listens: a host that is down.
            import yaml

            hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
            subnet = state["subnet"].rsplit(".", 1)[0]
            hosts["gpu_nodes"]["hosts"]["down-99"] = {
                "ansible_host": f"{subnet}.250",
                "ansible_user": "root",
                "gpuready_node_class": "hgx-h100",
                "ansible_ssh_private_key_file": state["key"],
                "ansible_host_key_checking": False,
            }
            (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
        yield {**state, "inventory": inventory, "sshd_log": logs}
    finally:
        nodes.down_hosts(state)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
        assert f"{prefix}-" not in left, f"namespaces left behind: {left}"


def accepted(log: Path) -> int:
    """Connections the hosts' sshds accepted so far: their shared log (sshd -e, LogLevel INFO) says "Accepted
    publickey for USER from ADDRESS" once per authenticated connection, whichever host it was."""
    return log.read_text(errors="replace").count("Accepted publickey for ")
