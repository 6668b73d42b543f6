"""Writers for the one results model: summary.json, junit.xml, report.md (the terminal: terminal.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from gpuready.core import redact
from gpuready.core.artifacts import ArtifactNotWritten, write_json, write_text
from gpuready.core.bulk import no_cycle_collection
from gpuready.core.report.summary import showable, summarize
from gpuready.core.report.terminal import group_remedy
from gpuready.core.results import ERROR, FAILED, PASSED, PENDING, SKIPPED, RunResult, now_iso


def write_all(run: RunResult, folder: Path, *, every_row: bool = False) -> None:
    """Write every artifact of ``run`` into ``folder``; a ``FAILURE`` marker when it did not pass.

    report.md summarises per check and details the failures; ``every_row`` adds every host's rows
    (summary.json and junit.xml always have them). report.html is the page to hand over (core/report/html.py)."""
    from gpuready.core.report import html

    run.finished = run.finished or now_iso()
    run.artifacts = str(folder)
    rows = every_row
    marker = folder / "FAILURE"
    writers: list[tuple[Path, Callable[[], None]]] = [
        (folder / "summary.json", lambda: write_json(folder / "summary.json", run.to_dict())),
        (folder / "junit.xml", lambda: write_junit(run, folder / "junit.xml")),
        (folder / "report.md", lambda: write_text(folder / "report.md", redact.text(markdown(run, every_row=rows)))),
        (folder / "report.html", lambda: write_text(folder / "report.html", html.render(run, folder))),
    ]
    if run.status != PASSED:
        writers.append((marker, lambda: write_json(marker, failure_marker(run))))
    elif marker.exists():
        marker.unlink()
    # Each is tried even when one before it failed (a full disk may still take a small file), and every one that
    # could not be written is named.
    failed: list[tuple[Path, ArtifactNotWritten]] = []
    with no_cycle_collection():
        for path, write in writers:
            try:
                write()
            except ArtifactNotWritten as e:
                failed.append((path, e))
    if failed:
        reason = failed[0][1].__cause__
        why = getattr(reason, "strerror", None) or str(failed[0][1])
        names = ", ".join(p.name for p, _ in failed)
        raise ArtifactNotWritten(f"could not write {names} in {folder}: {why}")


def as_json(run: RunResult) -> str:
    """The run as summary.json has it (secrets masked), with the folder it was read from (``--output json``,
    ``report show --json``)."""
    data = run.to_dict()
    data["artifacts"] = run.artifacts
    return json.dumps(redact.structure(data), indent=2, default=str)


def failure_marker(run: RunResult) -> dict[str, object]:
    """What the FAILURE file holds (JSON): the status, the counts per status, and why a run stopped short."""
    marker: dict[str, object] = {"status": run.status, "counts": run.counts()}
    if run.aborted:
        marker["aborted"] = run.aborted
    return marker


#: Characters XML 1.0 cannot hold (its Char production: tab, newline, carriage return and U+0020 on, less the
#: surrogates and U+FFFE/U+FFFF), and the C1 controls a terminal acts on (U+0080-U+009F, CSI among them).
def write_junit(run: RunResult, path: Path) -> None:
    """JUnit XML, one suite per host (written with ElementTree: linear at 1000 hosts x 30 checks)."""
    import xml.etree.ElementTree as ET

    # Every text is showable(): a node's kernel log line or name may hold bytes that no XML document can.
    command = showable(run.command)
    root = ET.Element("testsuites", name=command)
    suites: dict[str, ET.Element] = {}
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    tallies: dict[str, dict[str, int]] = {}
    classnames: dict[str, str] = {}
    for check in run.checks:
        if check.host not in suites:
            host = showable(check.host)
            suites[check.host] = ET.SubElement(root, "testsuite", name=f"{command} @ {host}")
            classnames[check.host] = f"{command}.{host}"
            tallies[check.host] = dict.fromkeys(totals, 0)
        case = ET.SubElement(suites[check.host], "testcase", name=showable(check.id), classname=classnames[check.host])
        tally = tallies[check.host]
        tally["tests"] += 1
        # JUnit knows no pending: a pending check is skipped there (not a failure), its message saying it pends.
        tag = {
            FAILED: ("failure", "failures"),
            ERROR: ("error", "errors"),
            SKIPPED: ("skipped", "skipped"),
            PENDING: ("skipped", "skipped"),
        }.get(check.status)
        if tag:
            message = f"pending: {check.message}" if check.status == PENDING else check.message
            ET.SubElement(case, tag[0], message=showable(redact.text(message)))
            tally[tag[1]] += 1
        text = redact.text("\n".join(filter(None, [check.evidence, check.remedy and f"remedy: {check.remedy}"])))
        if text:
            ET.SubElement(case, "system-out").text = showable(text)
    for host, suite in suites.items():
        for key, value in tallies[host].items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    write_text(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")


def _hosts(run: RunResult) -> int:
    return len({c.host for c in run.checks})


def markdown(run: RunResult, *, every_row: bool = False) -> str:
    """report.md: the same shape as the terminal (summary per check, failures grouped, their details), then
    every host's rows (``every_row``)."""
    from gpuready.core.report import markdown
    from gpuready.core.report.markdown import cell, inline

    lines = [
        f"# gpuready {inline(run.command)}",
        "",
        f"- status: **{run.status}**",
        f"- inventory: {inline(run.inventory)}",
        f"- started: {run.started}",
        f"- finished: {run.finished}",
        f"- hosts: {_hosts(run)}",
    ]
    if run.aborted:
        lines.append(f"- aborted: {inline(run.aborted)}")
    counts = run.counts()
    lines += [
        "- checks: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
        "",
        "## Summary",
        "",
        "| check | passed | failed | skipped | error | pending | failing hosts |",
        "|---|---|---|---|---|---|---|",
    ]
    summaries = summarize(run)
    for s in summaries:
        # <br> is ours (a line break in a table cell); what each group says is escaped.
        failing = "<br>".join(cell(f"{len(g.hosts)}: {g.names()} — {g.message}") for g in s.groups)
        cells = [s.id, *(str(s.counts[k]) for k in (PASSED, FAILED, SKIPPED, ERROR, PENDING))]
        lines.append("| " + " | ".join(cell(x) for x in cells) + " | " + failing + " |")
    details = [(s.id, g) for s in summaries for g in s.groups]
    if details:
        lines += ["", "## Failures", ""]
        for check_id, g in details:
            lines += [
                f"### {inline(check_id)} — {g.status} on {len(g.hosts)} host(s)",
                "",
                f"- message: {inline(g.message)}",
                f"- hosts: {inline(', '.join(g.hosts))}",
            ]
            if g.remedy:
                lines += markdown.remedy(group_remedy(run, g))
            lines.append("")
    lines += markdown.hosts_and_skips(run)
    if every_row:
        lines += ["", "## Every host", "", "| host | check | status | message | remedy |", "|---|---|---|---|---|"]
        for c in run.checks:
            cells = [c.host, c.id, c.status, c.message, c.remedy]
            lines.append("| " + " | ".join(cell(x) for x in cells) + " |")
    if run.metrics:
        lines += ["", "## Metrics", ""]
        metrics = redact.structure(run.metrics)
        # As summary.json writes them (true, null), not as Python prints them (True, None); escaped for Markdown.
        # A mapping of plain values (node_marks, vsphere) on its line as ``key: value`` pairs; lists and deeper
        # mappings (figures, the training sizes) are summary.json's alone.
        lines += [f"- {inline(k)}: {inline(_plain(v))}" for k, v in metrics.items() if _plain(v) is not None]
    return showable("\n".join(lines) + "\n")


def _plain(value: object) -> str | None:
    """A metric as report.md writes it, or None when it is too deep for one line."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if any(isinstance(v, dict | list) for v in value.values()):
            return None
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, list):
        return None
    return json.dumps(value)
