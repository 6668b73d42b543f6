"""Writers for the one results model: summary.json, junit.xml, report.md, terminal table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.core import redact
from gpuready.core.artifacts import write_json
from gpuready.core.results import ERROR, FAILED, PASSED, SKIPPED, RunResult, now_iso

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {PASSED: "green", FAILED: "bold red", SKIPPED: "yellow", ERROR: "bold magenta"}


def write_all(run: RunResult, folder: Path) -> None:
    """Write every artifact of ``run`` into ``folder``; a ``FAILURE`` marker when it did not pass."""
    run.finished = run.finished or now_iso()
    run.artifacts = str(folder)
    write_json(folder / "summary.json", run.to_dict())
    write_junit(run, folder / "junit.xml")
    (folder / "report.md").write_text(redact.text(markdown(run)))
    marker = folder / "FAILURE"
    if run.status != PASSED:
        marker.write_text(f"{run.status}: {run.aborted or run.counts()}\n")
    elif marker.exists():
        marker.unlink()


def write_junit(run: RunResult, path: Path) -> None:
    from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

    suites: dict[str, TestSuite] = {}
    for check in run.checks:
        suite = suites.setdefault(check.host, TestSuite(f"{run.command} @ {check.host}"))
        case = TestCase(check.id, classname=f"{run.command}.{check.host}")
        text = redact.text("\n".join(filter(None, [check.evidence, check.remedy and f"remedy: {check.remedy}"])))
        if check.status == FAILED:
            case.result = [Failure(redact.text(check.message))]
        elif check.status == ERROR:
            case.result = [Error(redact.text(check.message))]
        elif check.status == SKIPPED:
            case.result = [Skipped(redact.text(check.message))]
        if text:
            case.system_out = text
        suite.add_testcase(case)
    xml = JUnitXml(run.command)
    for suite in suites.values():
        suite.update_statistics()
        xml.add_testsuite(suite)
    xml.update_statistics()
    xml.write(str(path), pretty=True)


def markdown(run: RunResult) -> str:
    lines = [f"# gpuready {run.command}", "", f"- status: **{run.status}**", f"- inventory: `{run.inventory}`",
             f"- started: {run.started}", f"- finished: {run.finished}"]
    if run.aborted:
        lines.append(f"- aborted: {run.aborted}")
    counts = run.counts()
    lines += ["- checks: " + ", ".join(f"{n} {s}" for s, n in counts.items()), "",
              "| host | check | status | message | remedy |", "|---|---|---|---|---|"]
    for c in run.checks:
        cells = [c.host, c.id, c.status, c.message, c.remedy]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    if run.metrics:
        lines += ["", "## Metrics", ""]
        metrics = redact.structure(run.metrics)
        lines += [f"- {k}: {v}" for k, v in metrics.items() if not isinstance(v, dict | list)]
    return "\n".join(lines) + "\n"


def _cell(value: str) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def print_table(run: RunResult, console: Console, *, verbose: bool = False) -> None:
    """The terminal view: one row per check; passed rows folded per host unless ``verbose``."""
    from rich.table import Table

    table = Table(title=f"gpuready {run.command}", show_lines=False, expand=False)
    for column in ("host", "check", "status", "message"):
        table.add_column(column, overflow="fold")
    for check in run.checks:
        table.add_row(check.host, check.id, f"[{_STYLE[check.status]}]{check.status}[/]",
                      redact.text(check.message + (f"\n→ {check.remedy}" if check.remedy else "")))
    if run.checks:
        console.print(table)
    counts = run.counts()
    summary = ", ".join(f"[{_STYLE[s]}]{n} {s}[/]" for s, n in counts.items() if n)
    console.print(f"[bold]{run.status.upper()}[/] {summary or 'no checks'}"
                  + (f" — aborted: {redact.text(run.aborted)}" if run.aborted else ""))
    if run.artifacts:
        console.print(f"artifacts: {run.artifacts}")
