"""The verdict on a terminal: what failed and where, what was not tested, where the rest is; it fits the screen.

:func:`lines` is a function of the results alone (a finished run read back from summary.json renders the same),
so every command and ``report show`` print one verdict. Each line fits the width it is given: a cell is shortened,
never wrapped word by word (only a path, or a remedy's path too long for any line, stays whole to be copied). At
most :data:`MAX_LINES` lines are printed whatever the number of hosts: detail is given up in the order of
:data:`_STEPS` (remedies, second lines of messages, skip reasons, extra messages, host names) until it fits;
report.md and ``-v`` keep everything.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

from gpuready.core import redact
from gpuready.core.report.summary import CheckSummary, Group, showable, summarize
from gpuready.core.results import ERROR, FAILED, PASSED, PENDING, SKIPPED, RunResult

if TYPE_CHECKING:
    from rich.console import Console

#: The most lines a run prints, at 10 hosts or 1000: its verdict and its lines on stderr (``-v`` lifts it).
MAX_LINES = 40
#: The fewest lines the verdict gets, however many the run printed on stderr before it.
MIN_LINES = 24
#: Up to this many hosts, every host is named with its verdict.
HOSTS_NAMED = 20
#: Distinct failure messages shown per check before the rest are counted.
MESSAGES_PER_CHECK = 3
#: A pseudo-host: checks about the cluster as a whole (validate cluster), not about one machine.
CLUSTER = "cluster"

STYLE = {PASSED: "green", FAILED: "bold red", SKIPPED: "yellow", ERROR: "bold magenta", PENDING: "cyan"}
MARK = {FAILED: "✗", ERROR: "!"}
INDENT = "    "

_DEPENDS = re.compile(r"^depends on ([\w.]+)")
#: gpuready commands a remedy may name; those that take ``--limit`` get the group's hosts too.
_COMMAND = re.compile(r"\bgpuready ((?:provision|validate) [a-z][a-z-]*)(?! -i\b)")
_LIMITED = {"provision cluster", "validate gpu-node"}


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def remedy_for(remedy: str, hosts: list[str], inventory: str, *, limit: bool = True) -> str:
    """A group's remedy made runnable as written: ``<host>`` becomes every host it applies to, and each gpuready
    command in it gets ``-i`` with the run's inventory (as the user gave it) and, where it takes one and ``limit``
    says the hosts are the inventory's own (not nodes or VMs reached through an API), ``--limit`` with those
    hosts, so a pasted remedy acts on these hosts of this inventory and no other."""
    text = remedy.replace("<host>", ", ".join(hosts))
    if not inventory:
        return text

    def concrete(match: re.Match[str]) -> str:
        command = match.group(1)
        words = f"gpuready {command} -i {shlex.quote(inventory)}"
        rest = re.split(r"[`()]", text[match.end() :], maxsplit=1)[0]
        if limit and command in _LIMITED and hosts and "--limit" not in rest:
            words += f" --limit {shlex.quote(','.join(hosts))}"
        return words

    return _COMMAND.sub(concrete, text)


#: Where a gpuready command named in a remedy starts; it runs on over its options and their values.
_NAMED_COMMAND = re.compile(r"\bgpuready (?:provision|validate|inventory|report|lab) [a-z][a-z-]*")
#: A word of a command: a quoted value (an inventory path with a space, as ``shlex.quote`` writes it) or a word.
_WORD = re.compile(r"'[^']*'|[^\s]+")
#: Words that go on in prose after a flag, never an option's value.
_PROSE = {"then", "and", "or", "on", "to", "if", "for", "when", "does", "do", "again", "it", "so", "with", "after"}


def remedy_commands(remedy: str) -> list[str]:
    """The gpuready commands a remedy names, each ending where the prose goes on (a backtick, a bracket, a
    comma or semicolon, a full stop, a word of prose), so each runs as pasted: what report.md and report.html put
    in a code block, the prose staying outside it."""
    commands = []
    for match in _NAMED_COMMAND.finditer(remedy):
        words = [match.group(0)]
        for word in _WORD.findall(remedy[match.end() :]):
            if word[0] in "`(" or word in _PROSE or (not word.startswith("-") and not words[-1].startswith("-")):
                break
            bare = word.rstrip(",;.)`:")
            if bare:
                words.append(bare)
            if bare != word:
                break
        commands.append(" ".join(words))
    return list(dict.fromkeys(commands))


def group_remedy(run: RunResult, group: Group) -> str:
    """A failure group's remedy as the terminal, report.md and report.html all show it: secrets masked, every host
    of the group named, each gpuready command carrying ``-i`` as the user typed it (and ``--limit`` where it
    applies)."""
    return remedy_for(redact.text(group.remedy), group.hosts, run.inventory, limit=limits_hosts(run))


def todo_remedy(run: RunResult, remedy: str) -> str:
    """A remedy left to the user (after a passed or pending check) as every output shows it: secrets masked, each
    gpuready command carrying ``-i`` as the user typed it."""
    return redact.text(remedy_for(remedy, [], run.inventory))


def limits_hosts(run: RunResult) -> bool:
    """Whether the hosts of ``run``'s checks are hosts of its inventory that ``--limit`` selects (gpu-node's and
    provision's are; validate cluster's nodes and validate vsphere's ESXi hosts and VMs are reached through an API,
    and a limit to them would leave out the host that reaches it)."""
    return run.command in ("validate gpu-node", "provision cluster")


@dataclass
class _Budget:
    """How much detail goes in: each step down gives up some, in the order :data:`_STEPS` lists."""

    #: Lines a remedy may take (None: all of it; 0: none).
    remedy_lines: int | None = None
    message_lines: int = 2
    messages: int = MESSAGES_PER_CHECK
    reasons: int | None = None
    name_hosts: bool = True
    todo: int | None = None
    failing_checks: int | None = None


_STEPS = (
    {"message_lines": 1},
    {"remedy_lines": 2},
    {"reasons": 8},
    {"todo": 6},
    {"reasons": 5},
    {"remedy_lines": 1},
    {"todo": 3},
    {"reasons": 3},
    {"name_hosts": False},
    {"reasons": 0},
    {"messages": 2},
    {"messages": 1},
    {"messages": 0},
    {"remedy_lines": 0},
    {"failing_checks": 12},
)


def lines(
    run: RunResult, width: int = 80, *, max_lines: int | None = MAX_LINES, say_aborted: bool = True
) -> list[Text]:
    """The verdict of ``run`` as lines of at most ``width`` cells each, and at most ``max_lines`` lines (None: all
    the detail, as ``-v`` shows it)."""
    width = max(width, 40)
    summaries = summarize(run)
    budget = _Budget()
    out = _render(run, summaries, width, budget, say_aborted)
    if max_lines is not None:
        for step in _STEPS:
            if len(out) <= max_lines:
                break
            budget = replace(budget, **step)
            out = _render(run, summaries, width, budget, say_aborted)
        # The steps give up detail in a fixed order; what they left room for goes back to the remedies first.
        for lines_back in (None, 3, 2):
            if budget.remedy_lines is None or (lines_back is not None and lines_back <= budget.remedy_lines):
                continue
            relaxed = _render(run, summaries, width, replace(budget, remedy_lines=lines_back), say_aborted)
            if len(relaxed) <= max_lines:
                out = relaxed
                break
        out = out[:max_lines]
    return [_shown(line, width) for line in out]


def _shown(line: Text, width: int) -> Text:
    """``line`` with any control byte a node printed (ESC in a kernel log line) written out, not obeyed."""
    plain = showable(line.plain)
    return line if plain == line.plain else _fit(Text(plain, style=line.style), width)


def show(
    run: RunResult,
    console: Console,
    *,
    verbose: bool = False,
    error_follows: bool = False,
    max_lines: int = MAX_LINES,
) -> None:
    """Print the verdict at the console's width; ``verbose`` first prints every host's rows, and all the detail.
    ``error_follows``: the caller ends with the error that aborted the run as its one ``gpuready: error:`` line, so
    the verdict leaves its ``aborted:`` line out rather than say the same thing twice."""
    if verbose and run.checks:
        every_row(run, console)
    for line in lines(run, console.width, max_lines=None if verbose else max_lines, say_aborted=not error_follows):
        # Every line already fits, but for a path or a command, which stay whole to be copied.
        console.print(line, no_wrap=True, overflow="ignore", crop=False, soft_wrap=True)


def every_row(run: RunResult, console: Console) -> None:
    """``-v``: one row per host and check, the message and remedy in full (wrapped inside its own column)."""
    from rich.table import Table

    # showable(): a node's or a run folder's text is written out, never obeyed (ESC, OSC title, hyperlinks).
    rows = Table(title=showable(f"gpuready {run.command}: every host"), show_lines=False, expand=False)
    for column in ("host", "check", "status", "message"):
        rows.add_column(column, overflow="fold")
    for check in run.checks:
        rows.add_row(
            Text(showable(check.host)),
            Text(showable(check.id)),
            Text(check.status, style=STYLE[check.status]),
            Text(showable(redact.text(check.message + (f"\n→ {check.remedy}" if check.remedy else "")))),
        )
    console.print(rows)


def _render(
    run: RunResult, summaries: list[CheckSummary], width: int, budget: _Budget, say_aborted: bool = True
) -> list[Text]:
    out: list[Text] = []
    hosts = _hosts(run)
    verdicts = _host_verdicts(run)
    if run.command == "inventory check" and verdicts.get(run.inventory) in (PASSED, SKIPPED):
        del verdicts[run.inventory]  # the checks of the inventory folder itself: it is no host to list
    failing_hosts = [h for h, v in verdicts.items() if v in (FAILED, ERROR)]
    status = run.status.upper()
    head = Text()
    mode = " (check mode)" if run.metrics.get("check_mode") is True else ""
    head.append(f"{run.command}{mode}: ", style="bold")
    head.append(status, style=STYLE[run.status])
    if hosts:
        head.append(f" · {_subjects(run, hosts)}")
        if failing_hosts:
            head.append(f", {len(failing_hosts)} failing")
    out.append(_fit(head, width))
    out.append(Text(f"inventory: {run.inventory or '(none)'}"))  # a path: whole, to be copied
    if run.aborted and say_aborted:  # why the run stopped, whole: it often names a path to fix
        out += _wrapped(f"aborted: {redact.text(run.aborted)}", width, "", 4, STYLE[ERROR], cut=False)

    dependants = _dependants(run)
    failing = [s for s in summaries if s.counts[FAILED] or s.counts[ERROR]]
    shown = failing if budget.failing_checks is None else failing[: budget.failing_checks]
    id_width = min(max((len(s.id) for s in failing), default=0), width // 2)
    last_remedy: list[str] = []  # the remedy shown last: the same one again is "as above"
    for s in shown:
        line, named = _check_line(s, id_width, dependants.get(s.id, 0), width)
        out.append(line)
        out += _messages(run, s, width, budget, last_remedy, named)
    if len(shown) < len(failing):
        out.append(_fit(Text(f"  … {len(failing) - len(shown)} more failing check(s): report.md"), width))

    counts = run.counts()
    tally = Text("checks: ")
    parts = [(status_, counts[status_]) for status_ in (FAILED, ERROR, PASSED, PENDING, SKIPPED) if counts[status_]]
    for i, (status_, n) in enumerate(parts):
        tally.append(" · " if i else "")
        tally.append(f"{n} {status_}", style=STYLE[status_])
    if not parts:
        tally.append("none ran")
    changed = run.metrics.get("changed")
    if isinstance(changed, int) and not isinstance(changed, bool):
        verb = "would change" if run.metrics.get("check_mode") is True else "changed"
        tally.append(f"; Ansible tasks {verb}: {changed}")
    out.append(_fit(tally, width))

    out += _pending_lines(run, width, budget)
    out += _todo_lines(run, width, budget)
    out += _host_lines(verdicts, width, budget)
    out += _skip_lines(run, {s.id for s in failing} & set(dependants), width, budget)

    if run.artifacts:
        out.append(Text(f"artifacts: {run.artifacts}"))
    hidden = []
    if budget.remedy_lines is not None and any(g.remedy for s in failing for g in s.groups):
        hidden.append("remedies" if budget.remedy_lines == 0 else "whole remedies")
    if any(len(s.groups) > budget.messages for s in failing) or budget.message_lines < 2:
        hidden.append("every message")
    if hidden and run.checks:
        out.append(_fit(Text(f"{' and '.join(hidden)}: report.md there, or -v", style="dim"), width))
    return out


def _hosts(run: RunResult) -> list[str]:
    return list(dict.fromkeys(c.host for c in run.checks))


def _subjects(run: RunResult, hosts: list[str]) -> str:
    """What the run looked at, counted as the user knows them: ESXi hosts and VMs, nodes and the cluster."""
    vsphere = run.metrics.get("vsphere") if isinstance(run.metrics.get("vsphere"), dict) else None
    if run.command == "validate vsphere" and vsphere and "hosts" in vsphere:
        return f"{plural(vsphere['hosts'], 'ESXi host')}, {plural(vsphere.get('vms', 0), 'VM')}"
    if run.command == "inventory check" and isinstance(run.metrics.get("hosts"), int):
        # Its first checks are about the inventory folder itself, which is no host.
        return plural(run.metrics["hosts"], "host")
    if run.command == "report compare" and isinstance(run.metrics.get("runs"), int):
        # Its checks are the later runs against the first, which has none of its own.
        return plural(run.metrics["runs"], "run")
    machines = [h for h in hosts if h != CLUSTER]
    if run.command == "validate cluster":
        text = plural(len(machines), "node")
        return text + (" and the cluster" if CLUSTER in hosts else "")
    text = plural(len(machines), "host")
    if vsphere and "hosts" in vsphere:
        text += f"; vSphere: {plural(vsphere['hosts'], 'ESXi host')}, {plural(vsphere.get('vms', 0), 'VM')}"
    return text


def _host_verdicts(run: RunResult) -> dict[str, str]:
    """Each host's verdict: error over failed over pending over passed; a host whose checks were all skipped is
    skipped."""
    rank = {SKIPPED: 0, PASSED: 1, PENDING: 2, FAILED: 3, ERROR: 4}
    verdicts: dict[str, str] = {}
    for c in run.checks:
        if c.host not in verdicts or rank[c.status] > rank[verdicts[c.host]]:
            verdicts[c.host] = c.status
    return verdicts


def _dependants(run: RunResult) -> dict[str, int]:
    """Per check id: how many checks were skipped because they depend on it."""
    counts: dict[str, int] = {}
    for c in run.checks:
        if c.status == SKIPPED and (m := _DEPENDS.match(c.message)):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def _check_line(s: CheckSummary, id_width: int, dependants: int, width: int) -> tuple[Text, bool]:
    """``✗ id  failed on N hosts``; a check with one message names its hosts here, leaving its message a line,
    when a whole host name fits (else its message names them). Says whether the hosts are named."""
    line = Text()
    status = FAILED if s.counts[FAILED] else ERROR
    line.append(f"{MARK[status]} ", style=STYLE[status])
    line.append(_clip(s.id, id_width).ljust(id_width), style="bold")
    parts = []
    if s.counts[FAILED]:
        parts.append((FAILED, f"failed on {plural(s.counts[FAILED], 'host')}"))
    if s.counts[ERROR]:
        parts.append((ERROR, f"error on {plural(s.counts[ERROR], 'host')}"))
    for i, (st, text) in enumerate(parts):
        line.append(", " if i else "  ")
        line.append(text, style=STYLE[st])
    after = f"; {dependants} skipped after it" if dependants else ""
    named = False
    if len(s.groups) == 1:
        room = width - cell_len(line.plain) - cell_len(after) - 2
        names = _names(s.groups[0].hosts, max(room, 12))
        named = cell_len(names) <= room
        if named:
            line.append(": " + names)
    line.append(after)
    return _fit(line, width), named


def _remedy_lines(run: RunResult, g: Group, width: int, budget: _Budget, last: list[str]) -> list[Text]:
    """``g``'s remedy, or "as above" when it is the one shown just before (nine vSphere checks, one command)."""
    remedy = group_remedy(run, g)
    if last == [remedy]:
        return [Text(f"{INDENT}→ as above", style="cyan")]
    last[:] = [remedy]
    # Whole, a path in it too, to be pasted; cut short (report.md has it whole), a line's words are cut.
    whole = budget.remedy_lines is None
    return _wrapped(f"→ {remedy}", width, INDENT, budget.remedy_lines, style="cyan", cut=not whole)


def _messages(
    run: RunResult, s: CheckSummary, width: int, budget: _Budget, last_remedy: list[str], named: bool = True
) -> list[Text]:
    out: list[Text] = []
    if budget.messages == 0:  # what to do outlasts what was found: the remedy of the most hosts' failure stays
        first = s.groups[0]
        if budget.remedy_lines != 0 and first.remedy:
            out += _remedy_lines(run, first, width, budget, last_remedy)
        return out
    for g in s.groups[: budget.messages]:
        message = redact.text(g.message.replace("<host>", g.hosts[0]) if len(g.hosts) == 1 else g.message)
        if len(s.groups) > 1 or not named:  # one message: its hosts are on the check's line, where they fit
            message = f"{_names(g.hosts, width // 2)}: {message}"
        out += _wrapped(message, width, INDENT, budget.message_lines)
        if budget.remedy_lines != 0 and g.remedy:
            out += _remedy_lines(run, g, width, budget, last_remedy)
    more = len(s.groups) - budget.messages
    if more > 0 and budget.messages:
        out.append(_fit(Text(f"{INDENT}… {plural(more, 'more message')}", style="dim"), width))
    return out


def _names(hosts: list[str], room: int) -> str:
    """As many whole host names as fit in ``room`` cells (at least one), the rest counted."""
    shown: list[str] = []
    for i, host in enumerate(hosts):
        rest = len(hosts) - i - 1
        candidate = ", ".join([*shown, host]) + (f" +{rest} more" if rest else "")
        if shown and cell_len(candidate) > room:
            break
        shown.append(host)
    extra = len(hosts) - len(shown)
    return ", ".join(shown) + (f" +{extra} more" if extra else "")


def _pending_lines(run: RunResult, width: int, budget: _Budget) -> list[Text]:
    """Pending checks grouped by reason, one line each: what a reboot or an action outside gpuready finishes."""
    from gpuready.core.report.hosts import pendings

    groups = pendings(run)
    if not groups:
        return []
    shown = groups if budget.reasons is None else groups[: max(budget.reasons, 1)]  # what is left to do stays
    out = [_fit(Text("pending (a reboot or an action outside gpuready finishes it):", style=STYLE[PENDING]), width)]
    for g in shown:
        hosts = plural(len(g.hosts), "host")
        count = f": {hosts}" if g.count == len(g.hosts) else f": {g.count} checks on {hosts}"
        if len(g.hosts) == 1 and g.count > 1:
            count = f": {g.count} checks"  # the host is named under its verdict, or is the one of the run
        which = g.check_ids[0] if len(g.check_ids) == 1 else f"{g.check_ids[0]} +{len(g.check_ids) - 1}"
        checks = f" ({which})"
        reason = _clip(redact.text(" ".join(g.reason.split())), max(width - 2 - cell_len(count) - cell_len(checks), 24))
        out.append(_fit(Text(f"  {reason}{count}{checks}"), width))
    if len(shown) < len(groups):
        out.append(_fit(Text(f"  … {plural(len(groups) - len(shown), 'more reason')}", style="dim"), width))
    return out


def _todo_lines(run: RunResult, width: int, budget: _Budget) -> list[Text]:
    """What is left for the user (a reboot gpuready never does) after a check that passed or one left pending
    (ESXi's ATS takes effect at the host's next boot): each such remedy once."""
    todo: dict[str, str] = {}
    for c in run.checks:
        if c.remedy and c.status in (PASSED, PENDING):
            todo.setdefault(todo_remedy(run, c.remedy), c.id)
    if not todo:
        return []
    shown = list(todo.items())[: budget.todo]
    out = [_fit(Text("left to do:", style="cyan"), width)]
    for remedy, check_id in shown:
        out += _wrapped(f"→ {remedy} ({check_id})", width, "  ", budget.message_lines, style="cyan", cut=False)
    if len(shown) < len(todo):
        out.append(_fit(Text(f"  … {plural(len(todo) - len(shown), 'more')}", style="dim"), width))
    return out


def _host_lines(verdicts: dict[str, str], width: int, budget: _Budget) -> list[Text]:
    """At most :data:`HOSTS_NAMED` hosts: every host named under its verdict (healthy ones too); more: counts."""
    by_status: dict[str, list[str]] = {}
    for host, verdict in verdicts.items():
        by_status.setdefault(verdict, []).append(host)
    order = [s for s in (FAILED, ERROR, PENDING, PASSED, SKIPPED) if s in by_status]
    machines = [h for h in verdicts if h != CLUSTER]
    if not machines:
        return []
    if len(machines) <= HOSTS_NAMED and budget.name_hosts:
        out: list[Text] = []
        label_width = max(len(s) for s in order) + 1
        for status in order:
            label = f"{status}:".ljust(label_width)
            out += _wrapped_names(label, by_status[status], width, STYLE[status])
        return out
    line = Text("hosts: ")
    for i, status in enumerate(order):
        line.append(" · " if i else "")
        line.append(f"{len(by_status[status])} {status}", style=STYLE[status])
    return [_fit(line, width)]


def _wrapped_names(label: str, names: list[str], width: int, style: str) -> list[Text]:
    """``label`` then the names, wrapped between names (never inside one) under the first name."""
    out: list[Text] = []
    pad = " " * (cell_len(label) + 1)
    current = Text(label, style=style)
    current.append(" ")
    start = True
    for i, name in enumerate(names):
        piece = name + ("," if i < len(names) - 1 else "")
        if not start and cell_len(current.plain) + 1 + cell_len(piece) > width:
            out.append(current)
            current = Text(pad)
            start = True
        current.append(("" if start else " ") + piece)
        start = False
    out.append(_fit(current, width))
    return out


def _skip_lines(run: RunResult, folded: set[str], width: int, budget: _Budget) -> list[Text]:
    """Skipped checks grouped by reason, one line each: what was not tested, and on how many hosts."""
    groups: dict[str, tuple[set[str], list[str], int]] = {}
    for c in run.checks:
        if c.status != SKIPPED:
            continue
        reason = _reason(c.message)
        if (m := _DEPENDS.match(reason)) and m.group(1) in folded:
            continue  # counted on its failing check's line
        hosts, ids, n = groups.get(reason, (set(), [], 0))
        hosts.add(c.host)
        if c.id not in ids:
            ids.append(c.id)
        groups[reason] = (hosts, ids, n + 1)
    if not groups:
        return []
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1][0]), -kv[1][2], kv[0]))
    if budget.reasons == 0:
        skips = sum(n for _, _, n in groups.values())
        line = f"not tested (skipped): {plural(skips, 'check')}, {plural(len(ordered), 'reason')} in report.md"
        return [_fit(Text(line, style=STYLE[SKIPPED]), width)]
    shown = ordered if budget.reasons is None else ordered[: budget.reasons]
    out = [_fit(Text("not tested (skipped):", style=STYLE[SKIPPED]), width)]
    for reason, (hosts, ids, _) in shown:
        which = ids[0] if len(ids) == 1 else f"{ids[0]} +{len(ids) - 1}"
        count, checks = f": {plural(len(hosts), 'host')}", f" ({which})"
        # The reason gives way to its count and its check ids, which stay whole: an id cut cannot be looked up.
        reason = _clip(reason, max(width - 2 - cell_len(count) - cell_len(checks), 12))
        out.append(_fit(Text(f"  {reason}{count}{checks}"), width))
    if len(shown) < len(ordered):
        out.append(_fit(Text(f"  … {plural(len(ordered) - len(shown), 'more reason')}", style="dim"), width))
    return out


def _reason(message: str) -> str:
    """A skip's reason without its advice ("DCGM not installed: install ... " -> "DCGM not installed"), and a
    dependency without its parenthesis, so identical reasons group across checks and hosts. A short message is
    whole: it has no advice to drop."""
    message = " ".join(redact.text(message).split())
    if m := _DEPENDS.match(message):
        return m.group(0)
    if len(message) <= 48:
        return message
    depth = 0
    for i, ch in enumerate(message):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and message.startswith(": ", i) and len(message[:i].split()) >= 3:
            return message[:i]
    return message


def _clip(text: str, room: int) -> str:
    """``text`` in at most ``room`` cells, cut with an ellipsis."""
    if cell_len(text) <= room:
        return text
    cut = Text(text)
    cut.truncate(room, overflow="ellipsis")
    return cut.plain


def _fit(text: Text, width: int) -> Text:
    """One line of at most ``width`` cells: longer is cut with an ellipsis, never wrapped."""
    text = text.copy()
    text.plain = text.plain.replace("\n", " ")
    if cell_len(text.plain) > width:
        text.truncate(width, overflow="ellipsis")
    return text


def _wrapped(
    text: str, width: int, indent: str, max_lines: int | None, style: str = "", *, cut: bool = True
) -> list[Text]:
    """``text`` wrapped at spaces, the first line under ``indent`` and the rest two cells further in, in at most
    ``max_lines`` lines (the last ending in an ellipsis when there was more). No line is left holding one word:
    the word before it goes down with it. A word longer than a line is cut (``cut``; a remedy's path stays whole
    to be pasted), never broken onto lines of its own."""
    if max_lines == 1:
        return [Text(indent + _clip(" ".join(text.split()), width - cell_len(indent)), style=style)]
    room = width - cell_len(indent) - 2
    rows: list[list[str]] = [[]]
    for word in " ".join(text.split()).split(" "):
        word = _clip(word, room) if cut else word
        if rows[-1] and cell_len(" ".join([*rows[-1], word])) > (room + 2 if len(rows) == 1 else room):
            rows.append([])
        rows[-1].append(word)
    for i in range(1, len(rows)):
        if len(rows[i]) == 1 and len(rows[i - 1]) > 1 and cell_len(" ".join([rows[i - 1][-1], *rows[i]])) <= room:
            rows[i].insert(0, rows[i - 1].pop())
    lines = [" ".join(words) for words in rows if words]
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        last_room = room + 2 if max_lines == 1 else room
        lines[-1] = _clip(lines[-1] + " …", last_room) if cell_len(lines[-1]) + 2 > last_room else lines[-1] + " …"
    return [Text((indent if i == 0 else indent + "  ") + line, style=style) for i, line in enumerate(lines)]
