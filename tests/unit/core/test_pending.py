"""A pending check: done as far as gpuready goes, finished by a reboot or an action outside it (ESXi reads ATS
only at its next boot). It fails nothing, is its own state in every artifact, and its reason groups across
the ESXi hosts it is about.

The checks are the esxi_gpu role's findings as `provision cluster` reads them back on the vSphere lab (two
ESXi hosts of vcsim, reached from the one Ansible host ``vcsim``), rendered from its template.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader
from rich.cells import cell_len
from rich.console import Console

from gpuready.core.report import terminal, writers
from gpuready.core.results import PENDING, Check, RunResult, passed, skipped
from tests.conftest import ROOT

INVENTORY = "lab/vsphere/inventory"
ROLE_TEMPLATES = ROOT / "playbooks" / "roles" / "esxi_gpu" / "templates"


def role_findings(esxi_hosts: list[str]) -> list[dict[str, str]]:
    """The role's findings template rendered as Ansible renders it after ATS was set on ``esxi_hosts``."""
    env = Environment(loader=FileSystemLoader(ROLE_TEMPLATES), extensions=["jinja2.ext.loopcontrols"])
    env.filters["to_json"] = json.dumps
    env.filters["bool"] = bool
    text = env.get_template("findings.yml.j2").render(
        esxi_gpu_ats_result={"results": [{"changed": True, "item": {"name": h}} for h in esxi_hosts]},
        esxi_gpu_passthrough_result={"results": []},
        esxi_gpu_ats=True,
        ansible_check_mode=False,
    )
    return yaml.safe_load(text)


def provision_run() -> RunResult:
    run = RunResult(command="provision cluster", inventory=INVENTORY, artifacts="gpuready-runs/0001-x")
    run.metrics["vsphere"] = {"hosts": 2, "vms": 4}
    run.add(passed("vsphere.vcenter", "vcsim", "vCenter reached"))
    for item in role_findings(["DC0_H0", "DC0_H1"]):
        run.add(Check(host="vcsim", **item))
    run.add(skipped("driver.fabric_manager", "vcsim", "no NVSwitch on this host"))
    return run


def shown(run: RunResult) -> list[str]:
    console = Console(record=True, width=80, color_system=None, force_terminal=False, emoji=False)
    terminal.show(run, console)
    return console.export_text().splitlines()


def test_the_role_reports_ats_as_pending_without_a_host_name_in_its_reason() -> None:
    findings = role_findings(["DC0_H0", "DC0_H1"])
    assert {f["status"] for f in findings} == {PENDING}
    assert len({f["message"] for f in findings}) == 1, findings
    assert [f["remedy"] for f in findings] == [f"put DC0_H{i} in maintenance mode and reboot it" for i in (0, 1)]


def test_a_run_with_passes_and_pendings_passes_with_exit_0() -> None:
    run = provision_run()
    assert run.status == "passed" and run.exit_code() == 0
    assert run.counts()[PENDING] == 2


def test_the_verdict_folds_pending_checks_into_one_line_and_lists_what_is_left_to_do() -> None:
    text = shown(provision_run())
    assert all(cell_len(line) <= 80 for line in text), text
    assert text[0] == "provision cluster: PASSED · 1 host; vSphere: 2 ESXi hosts, 4 VMs"
    assert "checks: 1 passed · 2 pending · 1 skipped" in text
    pending = text.index("pending (a reboot or an action outside gpuready finishes it):")
    # One line for both ESXi hosts: the reason names neither.
    assert text[pending + 1] == "  ATS was set; effective at the next boot: 2 checks (vsphere.ats_reboot)"
    assert not text[pending + 2].startswith("  ATS"), text
    assert "  → put DC0_H0 in maintenance mode and reboot it (vsphere.ats_reboot)" in text
    assert "  → put DC0_H1 in maintenance mode and reboot it (vsphere.ats_reboot)" in text
    assert "pending: vcsim" in text
    # Not "not tested": the one skip is still listed as skipped, the pending checks are not.
    skips = text[text.index("not tested (skipped):") + 1 :]
    assert not any("ATS" in line for line in skips), text


def test_pending_is_carried_through_summary_junit_and_reports(tmp_path: Path) -> None:
    from tests.browser import Dom

    run = provision_run()
    writers.write_all(run, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "passed" and summary["counts"][PENDING] == 2
    again = RunResult.from_dict(summary)
    assert [c.status for c in again.checks].count(PENDING) == 2
    assert not (tmp_path / "FAILURE").exists()

    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert junit.get("failures") == "0" and junit.get("skipped") == "3"
    messages = [s.get("message") for s in junit.iter("skipped")]
    assert messages.count("pending: ATS was set; effective at the next boot") == 2, messages

    report = (tmp_path / "report.md").read_text()
    assert "## Pending: ATS was set;" in report
    # Prose, one item each: not a command to paste into a shell, so in no code block.
    assert (
        "- left to do: put DC0_H0 in maintenance mode and reboot it\n- left to do: put DC0_H1 in maintenance mode"
        in report
    )
    assert "| pending | vcsim | 1 |  |  | driver.fabric_manager | vsphere.ats_reboot |" in report

    page = Dom()
    page.feed((tmp_path / "report.html").read_text(encoding="utf-8"))
    section = page.root.by_id("pending")
    [article] = section.find_all("article", **{"class": "pending"})
    assert "vsphere.ats_reboot: pending on 1 host(s)" in article.all_text
    assert not article.find_all("pre", **{"class": "remedy"})
    todo = article.find_all("p", **{"class": "remedy"})
    assert [p.all_text for p in todo] == [f"left to do: put DC0_H{i} in maintenance mode and reboot it" for i in (0, 1)]
    verdict_cells = [td for td in page.root.by_id("matrix").find_all("td") if td.attrs.get("class") == PENDING]
    assert [td.all_text for td in verdict_cells] == [PENDING]


def test_the_findings_action_accepts_every_status_of_the_results_model() -> None:
    """The play's findings pass through the action plugin, which runs inside Ansible and cannot import gpuready:
    its copy of the statuses must be the results model's, or a role's pending finding fails the play."""
    import importlib.util

    from gpuready.core.results import CHECK_STATUSES

    spec = importlib.util.spec_from_file_location("findings_action", ROOT / "playbooks/plugins/action/findings.py")
    assert spec and spec.loader
    action = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action)
    assert tuple(action.STATUSES) == CHECK_STATUSES
