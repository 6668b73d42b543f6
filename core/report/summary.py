"""The summary model every renderer shows (terminal, report.md, report.html): per check its counts and its failing
hosts grouped by identical message, and text made safe to show."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.core.results import CHECK_STATUSES, ERROR, FAILED, RunResult

_UNSHOWABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def showable(text: str) -> str:
    """``text`` with every control character a node may have printed (ESC, NUL, SOH in a kernel log line or a
    name) written as ``\\x1b``: what XML cannot hold, and what a terminal showing report.md would obey."""
    return _UNSHOWABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else "\ufffd", text)


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
