"""Control bytes a node prints (a kernel log line with ESC, NUL, SOH) keep every artifact readable: junit.xml parses
with a strict XML parser, and summary.json keeps the bytes (JSON escapes them). Replayed on this machine: the lab's
recorded nvidia-smi and lsmod, and a real kernel log with one edit."""

from __future__ import annotations

import json
import os
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuready.lab import replay
from tests.conftest import ROOT, gpuready
from tests.unit.core.test_bad_inputs import make_inventory, with_settings

KERNEL_LOG = ROOT / "tests" / "fixtures" / "gpu" / "kernel-log" / "xid-32-69-62-gist-kohsuke.log"
#: The one edit (SOURCES.md there): the ErrorCode field of the first Xid 69 line gets an ANSI colour escape,
#: a NUL and an SOH before its value, as a corrupted console line could carry them.
FIELD, INJECTED = "ErrorCode 0000000c", "ErrorCode \x1b[31m\x00\x010000000c"


def test_control_bytes_in_a_kernel_log_line_leave_junit_valid(tmp_path: Path) -> None:
    log = KERNEL_LOG.read_bytes().decode()
    assert log.count(FIELD) == 1
    edited = tmp_path / "kernel.log"
    edited.write_bytes(log.replace(FIELD, INJECTED).encode())
    tools = replay.build("v100-x4", tmp_path / "replay")
    (tools / "dmesg").write_text(f"#!/bin/sh\ncat {shlex.quote(str(edited))}\n")
    hosts = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}}}
    model = {"gpu_model": "Tesla V100-SXM2-32GB", "gpu_count": 4}
    inv = make_inventory(tmp_path, hosts=hosts, settings=with_settings(node_classes__v100=model))
    runs = tmp_path / "runs"
    path = f"{tools}:{os.environ['PATH']}"  # the replayed tools first, as on a lab node
    done = gpuready(
        "validate", "gpu-node", "-i", str(inv), "--only", "gpu.xid", "--artifacts", str(runs), env={"PATH": path}
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    folder = next(runs.glob("*-validate-gpu-node"))

    # expat refuses any character XML 1.0 cannot hold: this parse is the strict check.
    junit = ET.parse(folder / "junit.xml")
    # --only gpu.xid brings the driver checks it depends on: the kernel log is gpu.xid's evidence.
    [out] = [case.findtext("system-out") for case in junit.iter("testcase") if case.get("name") == "gpu.xid"]
    assert "ErrorCode \\x1b[31m\\x00\\x010000000c" in out, out

    [xid] = [c for c in json.loads((folder / "summary.json").read_text())["checks"] if c["id"] == "gpu.xid"]
    assert INJECTED in xid["evidence"]  # summary.json keeps what the node printed (JSON escapes it)
