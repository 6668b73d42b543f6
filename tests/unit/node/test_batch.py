"""A host costs one round trip: the catalogue's commands, fallbacks included, travel in one batch."""

from __future__ import annotations

import functools
import shlex
from pathlib import Path
from typing import Any

import testinfra

from gpuready.core.settings import NodeClass, Settings
from gpuready.validate.node import checks
from gpuready.validate.node.node import Node

KERNEL_LOG = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "kernel-log" / "xid-63-ml-engineering.log"


class CountingHost:
    """A local testinfra host that counts its round trips (over SSH, each is a connection)."""

    def __init__(self) -> None:
        self.host = testinfra.get_host("local://")
        self.runs = 0

    def run(self, command: str) -> Any:
        self.runs += 1
        return self.host.run(command)


def with_path(folder: Path, script: str) -> str:
    return f"PATH={shlex.quote(str(folder))}:$PATH; export PATH; {script}"


def test_refused_dmesg_reads_the_journal_in_the_same_round_trip(tmp_path: Path) -> None:
    # A host where dmesg is refused (kernel.dmesg_restrict, no become): util-linux's message and exit status.
    (tmp_path / "dmesg").write_text(
        "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n"
    )
    # The journal answers only when asked for seconds-since-boot stamps (what the Xid window compares).
    (tmp_path / "journalctl").write_text(
        f'#!/bin/sh\ncase "$*" in *"-o short-monotonic"*) cat {shlex.quote(str(KERNEL_LOG))};; *) exit 2;; esac\n'
    )
    for tool in ("dmesg", "journalctl"):
        (tmp_path / tool).chmod(0o755)
    host = CountingHost()
    node_class = NodeClass(gpu_count=0)
    settings = Settings(node_classes={"c": node_class}, driver={"branch": "535", "version": "535.54.03"})
    node = Node("gn01", host, node_class, settings, wrap=functools.partial(with_path, tmp_path))
    node.prefetch(checks.prefetch_commands(node))
    check = checks.gpu.xid(node)
    assert host.runs == 1
    assert node.run("dmesg").rc == 1
    # The recorded Xid 63 (row remapping recorded; NVIDIA's catalog: IGNORE) comes from the journal's copy.
    assert check.status == "passed" and "1 application Xid(s)" in check.message, check.message
    assert "Xid 63 (GPU memory remapping event; NVIDIA: IGNORE" in check.evidence
    assert checks.JOURNAL_COMMAND in check.evidence
