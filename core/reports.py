"""Writers for the one results model: summary.json, junit.xml, report.md (the terminal: verdict_text)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuready.core import redact
from gpuready.core.artifacts import ArtifactNotWritten, write_json, write_text
from gpuready.core.bulk import no_cycle_collection
from gpuready.core.results import CHECK_STATUSES, ERROR, FAILED, PASSED, PENDING, SKIPPED, RunResult, now_iso
from gpuready.core.verdict_text import group_remedy


def write_all(run: RunResult, folder: Path, *, every_row: bool = False) -> None:
    """Write every artifact of ``run`` into ``folder``; a ``FAILURE`` marker when it did not pass.

    report.md summarises per check and details the failures; ``every_row`` adds every host's rows
    (summary.json and junit.xml always have them). report.html is the page to hand over (core/report_html.py)."""
    from gpuready.core import report_html

    run.finished = run.finished or now_iso()
    run.artifacts = str(folder)
    rows = every_row
    marker = folder / "FAILURE"
    writers: list[tuple[Path, Callable[[], None]]] = [
        (folder / "summary.json", lambda: write_json(folder / "summary.json", run.to_dict())),
        (folder / "junit.xml", lambda: write_junit(run, folder / "junit.xml")),
        (folder / "report.md", lambda: write_text(folder / "report.md", redact.text(markdown(run, every_row=rows)))),
        (folder / "report.html", lambda: write_text(folder / "report.html", report_html.render(run, folder))),
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


def failure_marker(run: RunResult) -> dict[str, object]:
    """What the FAILURE file holds (JSON): the status, the counts per status, and why a run stopped short."""
    marker: dict[str, object] = {"status": run.status, "counts": run.counts()}
    if run.aborted:
        marker["aborted"] = run.aborted
    return marker


#: Characters XML 1.0 cannot hold (its Char production: tab, newline, carriage return and U+0020 on, less the
#: surrogates and U+FFFE/U+FFFF), and the C1 controls a terminal acts on (U+0080-U+009F, CSI among them).
_UNSHOWABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def showable(text: str) -> str:
    """``text`` with every control character a node may have printed (ESC, NUL, SOH in a kernel log line or a
    name) written as ``\\x1b``: what XML cannot hold, and what a terminal showing report.md would obey."""
    return _UNSHOWABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else "\ufffd", text)


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


#: Host names shown per group; the rest are counted (every name is in summary.json and report.md).
NAMES_SHOWN = 3


@dataclass
class Group:
    """Hosts that got the same verdict and message from one check."""

    status: str
    message: str
    remedy: str
    hosts: list[str] = field(default_factory=list)

    def names(self, shown: int = NAMES_SHOWN) -> str:
        extra = len(self.hosts) - shown
        return ", ".join(self.hosts[:shown]) + (f" +{extra} more" if extra > 0 else "")


@dataclass
class CheckSummary:
    """One check across every host: counts per status and its failing hosts grouped by identical message."""

    id: str
    counts: dict[str, int]
    groups: list[Group]


def summarize(run: RunResult) -> list[CheckSummary]:
    """Per check, in the order checks first appear: counts, and failed/error hosts grouped by message."""
    summaries: dict[str, CheckSummary] = {}
    groups: dict[tuple[str, str, str], Group] = {}
    for c in run.checks:
        summary = summaries.setdefault(c.id, CheckSummary(c.id, dict.fromkeys(CHECK_STATUSES, 0), []))
        summary.counts[c.status] += 1
        if c.status in (FAILED, ERROR):
            # A message naming its own host ("cannot reach gn0997") groups with its siblings as "<host>".
            named = len(c.host) > 2
            message = c.message.replace(c.host, "<host>") if named else c.message
            key = (c.id, c.status, message)
            if key not in groups:
                # A remedy naming its host ("reboot esx-01") is written for every host of the group when shown.
                groups[key] = Group(c.status, message, c.remedy.replace(c.host, "<host>") if named else c.remedy)
                summary.groups.append(groups[key])
            groups[key].hosts.append(c.host)
    for summary in summaries.values():
        summary.groups.sort(key=lambda g: -len(g.hosts))
    return list(summaries.values())


def _hosts(run: RunResult) -> int:
    return len({c.host for c in run.checks})


def markdown(run: RunResult, *, every_row: bool = False) -> str:
    """report.md: the same shape as the terminal (summary per check, failures grouped, their details), then
    every host's rows (``every_row``)."""
    from gpuready.core import report_markdown
    from gpuready.core.report_markdown import cell, inline

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
                lines += [
                    "- remedy:",
                    "",
                    *report_markdown.code(group_remedy(run, g)),
                ]
            lines.append("")
    lines += report_markdown.hosts_and_skips(run)
    if every_row:
        lines += ["", "## Every host", "", "| host | check | status | message | remedy |", "|---|---|---|---|---|"]
        for c in run.checks:
            cells = [c.host, c.id, c.status, c.message, c.remedy]
            lines.append("| " + " | ".join(cell(x) for x in cells) + " |")
    if run.metrics:
        lines += ["", "## Metrics", ""]
        metrics = redact.structure(run.metrics)
        lines += [f"- {inline(k)}: {inline(v)}" for k, v in metrics.items() if not isinstance(v, dict | list)]
    return showable("\n".join(lines) + "\n")
