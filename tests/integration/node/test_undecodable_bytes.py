"""A byte that is not UTF-8 in what a node prints (dmesg prints binary junk from USB descriptors and firmware; a
GPU name can carry one) loses nothing: the byte is shown as U+FFFD, the evidence says so, and every other check of
the host is still judged. Replayed on this machine: the lab's recorded nvidia-smi and lsmod, and a real kernel
log, each with one edit (tests/fixtures/gpu/SOURCES.md)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from gpuready.lab import replay
from tests.conftest import ROOT, gpuready
from tests.unit.core.test_bad_inputs import make_inventory, with_settings

KERNEL_LOG = ROOT / "tests" / "fixtures" / "gpu" / "kernel-log" / "xid-32-69-62-gist-kohsuke.log"
#: The kernel log's edit: the ErrorCode field of its first Xid 69 line gets two bytes that are not UTF-8.
FIELD, INJECTED = b"ErrorCode 0000000c", b"ErrorCode \xff\xfe0000000c"
MODEL = "Tesla V100-SXM2-32GB"


def run(tmp_path: Path, tools: Path, only: str) -> tuple[int, str, dict[str, dict]]:
    hosts = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}}}
    inv = make_inventory(
        tmp_path, hosts=hosts, settings=with_settings(node_classes__v100={"gpu_model": MODEL, "gpu_count": 4})
    )
    runs = tmp_path / "runs"
    path = f"{tools}:{os.environ['PATH']}"  # the replayed tools first, as on a lab node
    done = gpuready(
        "validate", "gpu-node", "-i", str(inv), "--only", only, "--artifacts", str(runs), env={"PATH": path}
    )
    summary = json.loads(next(runs.glob("*-validate-gpu-node/summary.json")).read_text())
    return done.returncode, done.stdout + done.stderr, {c["id"]: c for c in summary["checks"]}


def test_junk_bytes_in_the_kernel_log_keep_the_xid_verdict(tmp_path: Path) -> None:
    log = KERNEL_LOG.read_bytes()
    assert log.count(FIELD) == 1
    edited = tmp_path / "kernel.log"
    edited.write_bytes(log.replace(FIELD, INJECTED))
    tools = replay.build("v100-x4", tmp_path / "replay")
    (tools / "dmesg").write_text(f"#!/bin/sh\ncat {shlex.quote(str(edited))}\n")
    code, printed, checks = run(tmp_path, tools, "gpu.xid")
    # The log's Xid 32/69/62 are still found and judged: a failed check, not a host that could not be read.
    assert code == 1, printed
    assert "UnicodeDecodeError" not in printed
    assert "host.reachable" not in checks  # that check is only reported for a host that could not be read
    xid = checks["gpu.xid"]
    assert xid["status"] == "failed"
    assert "ErrorCode \ufffd\ufffd0000000c" in xid["evidence"]
    assert "bytes that are not UTF-8 shown as \ufffd: dmesg: 2" in xid["evidence"]


def test_a_gpu_name_with_a_byte_that_is_not_utf8_keeps_the_host(tmp_path: Path) -> None:
    tools = replay.build("v100-x4", tmp_path / "replay")
    data = tools.parent / "data"
    # The edit: the first GPU's product name in the recorded XML and CSV ends in a Latin-1 byte.
    for name in ("q.xml", "query.csv"):
        raw = (data / name).read_bytes()
        assert MODEL.encode() in raw
        (data / name).write_bytes(raw.replace(MODEL.encode(), MODEL.encode() + b"\xe9", 1))
    code, printed, checks = run(tmp_path, tools, "gpu.model,gpu.count")
    assert "UnicodeDecodeError" not in printed
    assert "host.reachable" not in checks  # that check is only reported for a host that could not be read
    assert checks["gpu.count"]["status"] == "passed"
    # The odd GPU's name is not the class's model: a failed check that shows the name as read.
    model = checks["gpu.model"]
    assert model["status"] == "failed", model
    assert f"{MODEL}\ufffd" in model["message"] + model["evidence"]
    assert "bytes that are not UTF-8 shown as \ufffd: nvidia-smi -q -x: 1" in model["evidence"]
    assert code == 1, printed
