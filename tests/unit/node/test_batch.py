"""A host costs one round trip: the catalogue's commands, fallbacks included, travel in one batch."""

from __future__ import annotations

import functools
import shlex
from pathlib import Path
from typing import Any

import pytest
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


def streaming_node(tmp_path: Path, **kwargs: Any) -> tuple[Node, CountingHost, list[str]]:
    """A node on this machine reached as validate gpu-node reaches a host (connect.start: one process per
    connection, its output read as it comes), with the replayed nvidia-smi of an 8x H100 node on its PATH.
    The list records every script started: each is one connection over SSH."""
    from gpuready.core.inventory.connection import connection_spec
    from gpuready.lab import replay
    from gpuready.validate.node import connect

    tools = replay.build("h100-x8", tmp_path / "replay")
    spec = connection_spec("localhost", {"ansible_connection": "local"}, environ={})
    started: list[str] = []

    def open_(script: str) -> connect.Session:
        started.append(script)
        return connect.start(spec, 10, script)

    host = CountingHost()
    node = Node(
        "localhost",
        host,
        NodeClass(gpu_count=0),
        None,  # type: ignore[arg-type]
        wrap=functools.partial(with_path, tools),
        open=open_,
        **kwargs,
    )
    return node, host, started


def test_measuring_commands_ride_the_fixed_batchs_connection(tmp_path: Path) -> None:
    node, host, started = streaming_node(tmp_path)
    measured = tmp_path / "measured"
    measuring = [
        f"sleep 4; touch {measured}; echo measured",
        "echo gone >&2; exit 3",
        "command -v no-such-tool || echo '== absent'",
    ]
    node.prefetch(["nvidia-smi -q -x", "echo fixed"], then=measuring, then_timeout=30)
    # The fixed answers are back while the node still measures: the checks that read them need not wait. (Asked
    # of the measurement itself, not of a clock, so a loaded machine does not fail it.)
    assert not measured.exists()
    assert node.run("echo fixed").stdout == "fixed\n" and node.run("nvidia-smi -q -x").ok
    node.prefetch(measuring, timeout=30)
    alone = testinfra.get_host("local://")
    for command in measuring:
        expected = alone.run(command)
        answer = node.run(command)
        assert (answer.rc, answer.stdout, answer.stderr) == (expected.rc, expected.stdout, expected.stderr), command
    assert len(started) == 1 and host.runs == 0  # one connection, nothing asked again


def test_measuring_commands_do_not_run_where_nvidia_smi_fails(tmp_path: Path) -> None:
    # The replayed tools without their XML: nvidia-smi -q -x fails there, so driver.nvidia_smi fails and every
    # measuring check would be skipped; the node does not measure either.
    node, _, started = streaming_node(tmp_path)
    (tmp_path / "replay" / "data" / "q.xml").unlink()
    marker = tmp_path / "measured"
    node.prefetch(["nvidia-smi -q -x"], then=[f"touch {marker}"], then_timeout=30)
    assert not node.run("nvidia-smi -q -x").ok
    node.close()
    assert not marker.exists() and len(started) == 1


def test_a_measurement_past_its_limit_is_stopped_on_the_node(tmp_path: Path) -> None:
    import time

    node, _, started = streaming_node(tmp_path)
    node.prefetch(["nvidia-smi -q -x"], then=["echo quick", "sleep 30"], then_timeout=1)
    began = time.monotonic()
    with pytest.raises(ConnectionError, match="ran past 1s"):
        node.prefetch(["echo quick", "sleep 30"], timeout=1)
    assert time.monotonic() - began < 10
    assert node.run("echo quick").stdout == "quick\n"  # what finished before the limit keeps its answer
    assert len(started) == 1


def test_a_host_read_at_once_gets_the_measurements_in_the_same_round_trip(tmp_path: Path) -> None:
    # Without a streaming session (open=None: host.run), the whole script is one round trip all the same; a
    # measurement past its limit is answered as stopped (exit 124) and the host still counts as reached.
    node, host, started = streaming_node(tmp_path)
    node.open = None
    node.prefetch(["nvidia-smi -q -x"], then=["echo quick", "sleep 30"], then_timeout=1)
    assert host.runs == 1 and not started
    assert node.run("echo quick").stdout == "quick\n"
    stopped = node.run("sleep 30")
    assert stopped.rc == 124 and "ran past 1s" in stopped.stderr
    assert host.runs == 1
