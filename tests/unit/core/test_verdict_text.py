"""The terminal verdict fits 80 columns and 40 lines at 10 hosts and at 1000, from checks judged on a real recording.

The hosts are the H100 the GPU runbook recorded (tests/fixtures/gpu/recorded), judged in process by the real
catalogue; the faulty ones carry the one-field edits test_recorded_machines documents (a second GPU on the PCI
bus that nvidia-smi does not list, an HGX class declared for a VM without NVLink) and one edit of the
inventory's settings (a pinned driver version the machine does not have). Each variant is judged once and its
verdicts given to as many host names as the run needs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
from rich.cells import cell_len
from rich.console import Console

from gpuready.core.report import summary, terminal, writers
from gpuready.core.results import Check, RunResult, failed
from gpuready.validate.node import checks
from gpuready.validate.node.checks import run_catalogue
from gpuready.validate.node.node import Answer
from tests.unit.node.test_recorded_machines import H100, answers, replayed

INVENTORY = "inventories/site a"  # a space: the remedy must quote it to paste as one argument
PINNED = "580.65.06"


def variants() -> dict[str, list[Check]]:
    """Healthy, and each fault once: the recorded machine judged by the catalogue."""
    recorded = answers(H100)[checks.LSPCI_COMMAND]
    lost_gpu = Answer(recorded.command, 0, recorded.stdout + "0000:00:07.0 0x030200\n", "")
    nvlink = replayed(H100)
    nvlink.node_class = nvlink.node_class.model_copy(update={"nvlink_links_per_gpu": 18})
    pinned = replayed(H100)
    pinned.settings = pinned.settings.model_copy(
        update={"driver": pinned.settings.driver.model_copy(update={"version": PINNED})}
    )
    return {
        "healthy": run_catalogue(replayed(H100)),
        "lost-gpu": run_catalogue(replayed(H100, **{checks.LSPCI_COMMAND: lost_gpu})),
        "nvlink": run_catalogue(nvlink),
        "pinned": run_catalogue(pinned),
    }


def fleet(n: int, faults: dict[str, list[int]]) -> RunResult:
    """``n`` hosts gn0000...; host i gets the checks of the variant whose list holds i, else the healthy ones."""
    judged = variants()
    run = RunResult(command="validate gpu-node", inventory=INVENTORY, artifacts="gpuready-runs/0001-x")
    which = {i: name for name, hosts in faults.items() for i in hosts}
    for i in range(n):
        host = f"gn{i:04d}"
        for c in judged[which.get(i, "healthy")]:
            run.add(Check(c.id, host, c.status, c.message.replace(c.host, host), c.evidence, c.remedy))
    return run


THOUSAND = {"lost-gpu": list(range(7, 1000, 100)), "nvlink": [3, 253, 503, 753], "pinned": [11, 12, 13]}
TEN = {"lost-gpu": [1], "nvlink": [4], "pinned": [7, 8]}


def shown(run: RunResult, width: int = 80, verbose: bool = False) -> list[str]:
    console = Console(record=True, width=width, color_system=None, force_terminal=False, emoji=False)
    terminal.show(run, console, verbose=verbose)
    return console.export_text().splitlines()


def assert_fits(text: list[str], width: int = 80) -> None:
    assert len(text) <= terminal.MAX_LINES, "\n".join(text)
    assert all(cell_len(line) <= width for line in text), "\n".join(text)
    # A column wrapped word by word leaves lines of one word (or one word inside table borders).
    lone = [line for line in text if re.fullmatch(r"[│┃ ]*\S+[│┃ ]*", line)]
    assert not lone, "\n".join(text)


def test_a_thousand_hosts_fit_80_columns_and_40_lines() -> None:
    run = fleet(1000, THOUSAND)
    text = shown(run)
    assert_fits(text)
    assert text[0] == "validate gpu-node: FAILED · 1000 hosts, 17 failing"
    assert text[1] == f"inventory: {INVENTORY}"
    # One line per failing check with its host count and (one message) its hosts, the rest counted; the checks
    # skipped because they depend on it are counted there.
    assert [line for line in text if line.startswith("✗")] == [
        "✗ driver.version   failed on 3 hosts: gn0011, gn0012, gn0013",
        "✗ gpu.pci_bus      failed on 10 hosts: gn0007 +9 more; 30 skipped after it",
        "✗ topology.nvlink  failed on 4 hosts: gn0003, gn0253, gn0503, gn0753",
    ]
    # Each failure message once, under its check; three failing checks leave room for their remedies.
    assert "    2 NVIDIA GPUs on the PCI bus, nvidia-smi sees 1; not seen: 00:07.0" in text
    assert "    → Reseat the NVLink bridge (PCIe) or check the baseboard (SXM); run the" in text
    counts = run.counts()
    assert f"checks: {counts['failed']} failed · {counts['passed']} passed · {counts['skipped']} skipped" in text
    assert "hosts: 17 failed · 983 passed" in text
    # What was not tested, by reason, without -v.
    assert "  DCGM not installed: 1000 hosts (diag.dcgm)" in text
    assert "  nothing here measures it: 1000 hosts (perf.matmul_tflops +3)" in text
    assert text[-1] == "artifacts: gpuready-runs/0001-x"
    assert not [line for line in text if "gn0500" in line]  # a healthy host among 1000 is not named


def test_ten_hosts_name_every_host_with_its_verdict() -> None:
    text = shown(fleet(10, TEN))
    assert_fits(text)
    assert "failed: gn0001, gn0004, gn0007, gn0008" in text
    assert "passed: gn0000, gn0002, gn0003, gn0005, gn0006, gn0009" in text
    # Few failures leave room for the remedies, runnable as printed against the same inventory and hosts.
    remedy = next(line for line in text if "Provision the pinned driver" in line)
    assert "gpuready provision cluster -i 'inventories/site a' --limit gn0007,gn0008" in " ".join(
        line.strip() for line in text[text.index(remedy) : text.index(remedy) + 2]
    )


def test_narrow_and_wide_terminals_shorten_never_wrap() -> None:
    run = fleet(1000, THOUSAND)
    for width in (60, 80, 132):
        assert_fits(shown(run, width), width)
    wide = shown(run, 200)
    assert any(line.endswith("not seen: 00:07.0") for line in wide)  # room enough: the message whole


def test_verbose_keeps_every_row_and_every_detail() -> None:
    run = fleet(30, {"pinned": [1, 2], "lost-gpu": [5]})
    text = "\n".join(shown(run, verbose=True))
    assert "every host" in text and "gn0029" in text
    assert "report.md there" not in text


def test_a_remedy_pasted_from_the_verdict_runs_against_the_same_inventory_and_hosts() -> None:
    from gpuready.provision.cli import provision

    run = fleet(10, TEN)
    [group] = [g for s in summary.summarize(run) if s.id == "driver.version" for g in s.groups]
    remedy = terminal.remedy_for(group.remedy, group.hosts, run.inventory)
    command = re.search(r"gpuready (provision cluster [^()]*?)(?= \(|$)", remedy)
    assert command, remedy
    import shlex

    args = shlex.split(command.group(1))[2:]  # after "provision cluster"
    ctx = provision.commands["cluster"].make_context("cluster", args)
    assert str(ctx.params["inventory_path"]) == INVENTORY and ctx.params["limit"] == "gn0007,gn0008"
    assert isinstance(ctx, click.Context)


def test_a_remedy_that_names_its_host_names_every_host_of_the_group() -> None:
    run = RunResult(command="validate vsphere", inventory="lab/vsphere")
    for host in ("esx-01", "esx-02"):
        run.add(failed("vsphere.passthrough", host, "0000:17:00.0: enabled but not active", remedy=f"reboot {host}"))
    [group] = summary.summarize(run)[0].groups
    assert terminal.remedy_for(group.remedy, group.hosts, run.inventory) == "reboot esx-01, esx-02"
    assert any("→ reboot esx-01, esx-02" in line for line in shown(run))


def test_failure_marker_is_json(tmp_path: Path) -> None:
    run = fleet(10, TEN)
    writers.write_all(run, tmp_path)
    marker = json.loads((tmp_path / "FAILURE").read_text())
    assert marker == {"status": "failed", "counts": run.counts()}


def test_report_md_remedy_carries_the_inventory_and_every_host(tmp_path: Path) -> None:
    writers.write_all(fleet(10, TEN), tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "gpuready provision cluster -i 'inventories/site a' --limit gn0007,gn0008" in report


def test_report_html_remedy_is_the_one_the_terminal_and_report_md_show(tmp_path: Path) -> None:
    from tests.browser import Dom

    run = fleet(10, TEN)
    writers.write_all(run, tmp_path)
    page = Dom()
    page.feed((tmp_path / "report.html").read_text(encoding="utf-8"))
    findings = {a.find_all("h3")[0].all_text: a for a in page.root.find_all("article", **{"class": "finding"})}
    pinned = findings["driver.version: failed on 2 host(s)"]
    [remedy] = [pre.all_text for pre in pinned.find_all("pre", **{"class": "remedy"})]
    assert "gpuready provision cluster -i 'inventories/site a' --limit gn0007,gn0008" in remedy
    assert remedy in (tmp_path / "report.md").read_text()
    assert " ".join(remedy.split()) in " ".join(" ".join(shown(run)).split())


def test_control_bytes_a_node_printed_are_shown_not_obeyed() -> None:
    run = RunResult(command="validate gpu-node", inventory="inv")
    run.add(failed("gpu.xid", "gn0001", "Xid 69: ErrorCode \x1b[31m\x00\x010000000c"))
    text = "\n".join(shown(run))
    assert "\x1b" not in text and "\\x1b[31m\\x00\\x010000000c" in text


def test_a_long_skip_reason_gives_way_to_its_host_count() -> None:
    from gpuready.core.results import skipped

    run = RunResult(command="validate training", inventory="inv")
    reason = "CPU run: weak-scaling efficiency 50.2% recorded, not judged (11.5 images/s per worker on the CPU)"
    run.add(skipped("training.2w.scaling", "localhost", reason))
    [line] = [line for line in shown(run) if "weak-scaling" in line]
    assert cell_len(line) <= 80 and "…: 1 host (training" in line, line
