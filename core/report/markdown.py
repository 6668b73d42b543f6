"""report.md's per-host sections: each host's verdict (hosts with the same verdict on every check on one line)
and what was skipped, grouped by reason, so what was not tested is named in the report."""

from __future__ import annotations

from gpuready.core.report.hosts import matrix, natural, pendings, skips
from gpuready.core.results import ERROR, FAILED, PENDING, SKIPPED, RunResult


def code(text: str) -> list[str]:
    """``text`` as a fenced code block, fenced longer than any backtick run inside it."""
    fence = "```"
    while fence in text:
        fence += "`"
    return [fence + "sh", text, fence]


#: What Markdown would turn into live markup: raw HTML (``<``, ``>``, ``&``: a host named ``<img src=x
#: onerror=...>`` would run in MkDocs, a CI summary or a wiki) and links or images (``[``, ``]``). CommonMark
#: lets any ASCII punctuation be backslash-escaped and reads entities as the character
#: (https://spec.commonmark.org/0.31.2/#backslash-escapes, #entity-and-numeric-character-references); the
#: backslash itself first, or ``\[`` in a name would undo the escape of its bracket.
_MARKUP = str.maketrans({"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "`": "\\`"})


def inline(value: object) -> str:
    """Text from a node, an inventory or a run folder as inert Markdown on one line: no HTML, link or image
    it could make, and no line break that would start a heading, a list or a code fence."""
    return " ".join(str(value).split()).translate(_MARKUP)


def cell(value: object) -> str:
    """:func:`inline`, for a table cell (``|`` would end it)."""
    return inline(value).replace("|", "\\|")


def remedy(text: str, label: str = "remedy") -> list[str]:
    """A remedy as prose (escaped, as every text here), then the gpuready commands it names in a code block, each
    a command that runs as pasted (prose in a code block would be pasted into a shell too)."""
    from gpuready.core.report.terminal import remedy_commands

    commands = remedy_commands(text)
    return [f"- {label}: {inline(text)}", *(["", *code("\n".join(commands))] if commands else [])]


def hosts_and_skips(run: RunResult) -> list[str]:
    grid = matrix(run)
    if not grid.hosts:
        return []
    lines = [
        "",
        "## Hosts",
        "",
        f"{len(grid.hosts)} host(s); hosts with the same verdict on every check share a row.",
        "",
        "| verdict | hosts | count | failed | error | skipped | pending |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in grid.rows:
        by_status = {
            status: ", ".join(i for i, s in zip(grid.check_ids, row.statuses, strict=True) if s == status)
            for status in (FAILED, ERROR, SKIPPED, PENDING)
        }
        names = ", ".join(sorted(row.hosts, key=natural))
        cells = [row.verdict, names, str(len(row.hosts)), *(by_status[s] for s in (FAILED, ERROR, SKIPPED, PENDING))]
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    lines += _pending(run)
    groups = skips(run)
    if groups:
        lines += ["", "## Skipped", "", "| reason | checks | count | hosts |", "|---|---|---|---|"]
        for g in groups:
            cells = [g.reason, ", ".join(g.check_ids), str(len(g.hosts)), ", ".join(g.hosts)]
            lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return lines


def _pending(run: RunResult) -> list[str]:
    """What a reboot or an action outside gpuready finishes, by reason, with each thing left to do as code."""
    from gpuready.core.report.terminal import todo_remedy

    lines: list[str] = []
    for g in pendings(run):
        lines += ["", f"## Pending: {cell(g.reason)}", "", f"- checks: {inline(', '.join(g.check_ids))} ({g.count})"]
        lines.append(f"- hosts: {inline(', '.join(g.hosts))}")
        for r in g.remedies:
            lines += remedy(todo_remedy(run, r), "left to do")
    return lines
