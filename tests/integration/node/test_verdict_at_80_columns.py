"""`validate gpu-node` on the nodes lab, read as in a pipe or CI log (80 columns): at most 40 lines, none wrapped.

The lab's hosts replay real recordings, healthy and faulty (gpuready.lab.replay.PROFILES); one more inventory
host has an address where nothing answers. The 1000-host shape is tests/unit/core/test_verdict_text.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from gpuready.lab.nodes import DEFAULT_PROFILES
from gpuready.lab.replay import profile_names
from tests.conftest import ModuleTmp, gpuready
from tests.integration.node.conftest import start

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: Every lab profile (9 faulty), and a host that is down.
PROFILES = profile_names(DEFAULT_PROFILES)


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    yield from start(module_tmp("verdict"), PROFILES, unreachable=True)


def validate(lab: dict[str, Any], artifacts: Path, *args: str) -> tuple[list[str], dict[str, Any]]:
    done = gpuready(
        "validate", "gpu-node", "-i", str(lab["inventory"]), "--artifacts", str(artifacts), *args, env={"COLUMNS": "80"}
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [run] = artifacts.iterdir()
    return done.stdout.splitlines(), json.loads((run / "summary.json").read_text())


def test_every_profile_and_a_down_host_fit_40_lines_of_80_columns(lab: dict[str, Any], tmp_path: Path) -> None:
    text, summary = validate(lab, tmp_path / "runs")
    shown = "\n".join(text)
    assert len(text) <= 40, shown
    # Only a path too long for the line stays whole, to be copied.
    assert all(cell_len(line) <= 80 for line in text if not line.startswith(("inventory: ", "artifacts: "))), shown
    assert not [line for line in text if re.fullmatch(r"\s*\S+\s*", line)], shown  # no lone word of a wrapped cell
    hosts = [h["name"] for h in lab["hosts"]] + ["down-99"]
    assert text[0] == f"validate gpu-node: ERROR · {len(hosts)} hosts, 10 failing"
    assert text[1] == f"inventory: {lab['inventory']}"
    # Each failing or erroring check once, with its host count.
    failing = {c["id"] for c in summary["checks"] if c["status"] in ("failed", "error")}
    lines = {line.split()[1]: line for line in text if line.startswith(("✗ ", "! "))}
    assert set(lines) == failing, shown
    assert lines["perf.h2d_bandwidth"].startswith("✗ perf.h2d_bandwidth") and "failed on 2 hosts" in shown
    assert "error on 1 host: down-99" in lines["host.reachable"]
    # Each failing check with its remedy (what to do beats what was seen, when 40 lines hold only one of them);
    # the messages and every host's rows are in report.md, as the last line says.
    for line in lines.values():
        assert text[text.index(line) + 1].startswith("    → "), shown
    assert text[text.index(lines["host.reachable"]) + 1].startswith("    → Check ansible_host"), shown
    failing_hosts = {c["host"] for c in summary["checks"] if c["status"] in ("failed", "error")}
    named = " ".join(lines.values())
    assert all(host in named for host in failing_hosts if host not in ("slow-gpu-10", "busy-gpu-11")), shown
    assert "hosts: 9 failed · 1 error · 3 passed" in text, shown
    assert re.search(r"^not tested \(skipped\): \d+ checks, \d+ reasons in report\.md$", shown, re.M), shown
    assert text[-1] == "whole remedies and every message: report.md there, or -v", shown
    counts = summary["counts"]
    assert (
        f"checks: {counts['failed']} failed · {counts['error']} error · {counts['passed']} passed · "
        f"{counts['skipped']} skipped" in text
    )
    assert text[-2].startswith(f"artifacts: {tmp_path / 'runs'}/")


def test_ten_hosts_and_the_full_table_with_v(lab: dict[str, Any], tmp_path: Path) -> None:
    ten = ",".join(h["name"] for h in lab["hosts"][:10])
    text, _ = validate(lab, tmp_path / "runs", "--limit", ten)
    assert len(text) <= 40, "\n".join(text)
    assert text[0] == "validate gpu-node: FAILED · 10 hosts, 7 failing"
    full, _ = validate(lab, tmp_path / "all", "--limit", ten, "-v")
    assert len(full) > 100 and "every host" in "\n".join(full)
