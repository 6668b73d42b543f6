"""Text from nodes that XML cannot hold, or a terminal would obey, is written visibly in junit.xml and report.md."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from gpuready.core.report.summary import showable
from gpuready.core.report.writers import markdown, write_junit
from gpuready.core.results import RunResult, failed

#: What a node's console could hand back: clear-screen and colour escapes, NUL, SOH, a C1 CSI, DEL.
RAW = "GPU \x1b[2J\x1b[31mfell off the bus\x00\x01\x9b0m\x7f"


def run_with(text: str) -> RunResult:
    run = RunResult(command="validate gpu-node")
    run.add(failed("gpu.xid", f"gn{text}01", f"Xid 79: {text}", evidence=text, remedy=text))
    return run


def test_showable_writes_control_characters_as_escapes() -> None:
    assert showable(RAW) == "GPU \\x1b[2J\\x1b[31mfell off the bus\\x00\\x01\\x9b0m\\x7f"
    assert showable("tab\tnew\nline\r ünïcode ✓") == "tab\tnew\nline\r ünïcode ✓"


def test_junit_parses_and_report_md_has_no_raw_control_characters(tmp_path: Path) -> None:
    run = run_with(RAW)
    write_junit(run, tmp_path / "junit.xml")
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.find("testsuite").get("name") == "validate gpu-node @ " + showable(f"gn{RAW}01")
    assert root.find("testsuite/testcase/failure").get("message") == showable(f"Xid 79: {RAW}")
    report = markdown(run, every_row=True)
    assert not any(c in report for c in "\x1b\x00\x01\x9b\x7f"), report
    # Written out, and its bracket escaped for Markdown (no link can start there).
    assert "\\x1b\\[2J" in report
