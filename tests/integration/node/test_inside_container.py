"""The node checks inside a container judge no host file they cannot see: node.selinux_labels is skipped there.

A node is made for real in namespaces of its own: a PID namespace whose PID 1 is the node's "init" (as a
DaemonSet with hostPID: true sees the host's), and a mount namespace with a /dev of its own holding the replayed
profile's device files and their SELinux labels (gpuready.lab.replay, profile selinux-label: enforcing,
/dev/nvidia2 labelled device_t). ``validate this-node`` then runs in that same mount namespace (the node itself),
or in a mount namespace of its own under ``unshare --mount`` (a container's, which is all the detection sees of
one), or where podman's marker file is. Nothing is mocked: the checks' own shell line finds what is there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuready.lab import replay
from tests.conftest import require

pytestmark = [pytest.mark.root]

#: PID 1 of the node's PID namespace: the node's own /dev (as the nodes lab gives its hosts), the marker of the
#: container this machine may itself be masked (as the nodes lab does), optionally podman's marker in a /run of its
#: own, then the command; never exec'd, so PID 1 stays the node's "init" in the node's mount namespace.
NODE = """set -e
mount -t tmpfs -o mode=755 tmpfs /dev
mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && mknod -m 666 /dev/urandom c 1 9
sh "$GPUREADY_DEVICES" >/dev/null
for f in /.dockerenv /run/.containerenv; do if [ -f "$f" ]; then mount --bind /dev/null "$f"; fi; done
if [ -n "$GPUREADY_PODMAN" ]; then mount -t tmpfs tmpfs /run && : > /run/.containerenv; fi
"$@"
exit $?
"""


def this_node(tmp_path: Path, *, container: bool = False, podman: bool = False) -> dict[str, Any]:
    """node.selinux_labels of ``validate this-node`` on a node replaying the selinux-label profile."""
    require(os.geteuid() == 0 and shutil.which("unshare") is not None, "needs root and unshare (namespaces)")
    require(shutil.which("getfattr") is not None, "needs getfattr (attr; scripts/install-system-deps)")
    tools = replay.build("selinux-label", tmp_path / "replay")
    script = tmp_path / "node.sh"
    script.write_text(NODE)
    command = [sys.executable, "-m", "gpuready.core.cli", "validate", "this-node", "--set", "quick"]
    command += ["--node-name", "n1", "--verdict", "-"]
    # The container's mount namespace: a copy of the node's (the same /dev), but not PID 1's.
    inner = ["unshare", "--mount", "--propagation", "private"] if container else []
    node = ["unshare", "--pid", "--fork", "--mount-proc", "--mount", "--propagation", "private", "sh", str(script)]
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "SLURMD_NODENAME": "",
        "GPUREADY_DEVICES": str(tools.parent / "devices.sh"),
        "GPUREADY_PODMAN": "1" if podman else "",
    }
    done = subprocess.run([*node, *inner, *command], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert "Traceback" not in done.stderr and done.stdout.startswith("{"), done.stderr
    checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    return {"rc": done.returncode, **checks["node.selinux_labels"]}


def test_on_the_node_itself_wrong_labels_fail(tmp_path: Path) -> None:
    got = this_node(tmp_path)
    assert got["status"] == "failed", got
    assert "/dev/nvidia2 is system_u:object_r:device_t:s0" in got["message"]
    assert got["rc"] == 1


def test_in_a_mount_namespace_other_than_pid_1s_the_labels_are_not_judged(tmp_path: Path) -> None:
    got = this_node(tmp_path, container=True)
    assert got["status"] == "skipped", got
    said = "not judged: the checks run inside a container (its mount namespace is not that of PID 1"
    assert got["message"].startswith(said), got
    assert "gpuready validate gpu-node` over SSH on the node" in got["message"]


def test_where_podmans_marker_is_the_labels_are_not_judged(tmp_path: Path) -> None:
    got = this_node(tmp_path, podman=True)
    assert got["status"] == "skipped", got
    assert "podman's /run/.containerenv is there" in got["message"]
