"""Every remedy in report.md and report.html reads as prose, and what they put in a code block is a command that
runs as pasted: `bash -n` parses it and gpuready's own parser (click) accepts its options."""

from __future__ import annotations

import html
import re
import shlex
import subprocess
from pathlib import Path

from gpuready.core.report import writers
from gpuready.core.results import RunResult, failed, pending
from gpuready.validate.cluster import SELINUX_REMEDY
from gpuready.validate.node.checks import CATALOGUE
from gpuready.validate.vsphere import REPROVISION
from tests.conftest import gpuready

#: The remedies gpuready writes, with the one a user pasted and got `No such option '--allow-power-off,'` from.
REMEDIES = [
    *(d.remedy for d in CATALOGUE),
    SELINUX_REMEDY,
    f"{REPROVISION}, then reboot esx1.lab.local",
    "run `gpuready provision cluster --tags kubernetes` (it labels the node and deploys the plugin)",
]


def _reports(tmp_path: Path, inventory: str) -> tuple[str, str]:
    run = RunResult(command="provision cluster", inventory=inventory)
    for i, remedy in enumerate(REMEDIES):
        run.add(failed(f"check.n{i}", "gn 01" if i % 2 else "gn02", f"finding {i}", remedy=remedy))
    run.add(pending("driver.reboot", "gn03", "reboot pending", remedy=f"{REPROVISION}, then reboot gn03"))
    folder = tmp_path / "run"
    folder.mkdir()
    writers.write_all(run, folder)
    return (folder / "report.md").read_text(), (folder / "report.html").read_text()


def _code_lines(md: str, page: str) -> list[str]:
    blocks = re.findall(r"^```+sh\n(.*?)\n```+$", md, re.DOTALL | re.MULTILINE)
    blocks += [html.unescape(b) for b in re.findall(r'<pre class="remedy"><code>(.*?)</code></pre>', page, re.DOTALL)]
    return [line for block in blocks for line in block.splitlines()]


def test_every_remedy_code_line_runs_as_pasted_into_bash_and_gpureadys_parser(tmp_path: Path) -> None:
    md, page = _reports(tmp_path, "my inventories/site")
    lines = _code_lines(md, page)
    assert lines, md
    for line in lines:
        parsed = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, timeout=30)
        assert parsed.returncode == 0, (line, parsed.stderr)
    for line in sorted(set(lines)):
        words = shlex.split(line)
        assert words[0] == "gpuready", line  # prose stays outside the code blocks
        # --help is eager: click has parsed every option before it answers, and refuses one it does not know.
        done = gpuready(*words[1:], "--help")
        assert done.returncode == 0, (line, done.stderr)
    assert (
        "gpuready provision cluster -i 'my inventories/site' --limit 'gn 01' --tags vsphere --allow-power-off" in lines
    )
    assert "gpuready provision cluster -i 'my inventories/site' --tags vsphere --allow-power-off" in lines


def test_the_prose_of_each_remedy_is_kept_whole_outside_the_code(tmp_path: Path) -> None:
    md, page = _reports(tmp_path, "inventories/site")
    assert "- remedy: SELinux labels are wrong on the node: /dev/nvidia* must be" in md
    assert "- remedy: Check cooling, airflow and power supply; nvidia-smi -q -d PERFORMANCE" in md
    assert '<p class="remedy">remedy: Check cooling, airflow and power supply;' in page
    assert "- left to do: gpuready provision cluster -i inventories/site --tags vsphere --allow-power-off, then" in md
