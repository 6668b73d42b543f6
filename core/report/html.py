"""report.html: one self-contained page a person can be handed after a run.

Nothing is fetched: the style and the sorting script are inline and the run folder's plots are embedded as
data: URIs, so the file can be mailed or attached to a ticket. Every text from a host goes through
:func:`esc` (secrets masked, control characters shown, HTML escaped). At 1,000 hosts the page stays small:
hosts with the same verdict on every check share a matrix row, and passing hosts' figures are summarised.
"""

from __future__ import annotations

import base64
import html
import statistics
from pathlib import Path
from typing import Any

from gpuready.core import redact
from gpuready.core.report.hosts import (
    SEVERITY,
    Figure,
    Matrix,
    figures,
    is_figure,
    matrix,
    natural,
    pendings,
    skips,
)
from gpuready.core.report.summary import showable, summarize
from gpuready.core.report.terminal import group_remedy, remedy_commands, todo_remedy
from gpuready.core.results import ERROR, FAILED, PASSED, PENDING, SKIPPED, Check, RunResult

#: Up to this many hosts, every host's measured figures and its own row are shown; beyond, a summary per check.
EVERY_HOST_UP_TO = 20
#: Rows of checks that did not pass shown with their figures beyond EVERY_HOST_UP_TO hosts (the rest are counted:
#: every one is in summary.json); their failures are grouped above in any case.
FIGURE_ROWS = 40
#: Host names shown before the rest fold into a "+N more" that opens.
NAMES_SHOWN = 5
#: Plots bigger than this are linked, not embedded (a page of several megabytes is no longer one to mail).
PLOT_LIMIT = 2 * 2**20

GLYPH = {PASSED: "✓", FAILED: "✗", ERROR: "!", SKIPPED: "–", PENDING: "…", "": ""}

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 1rem 3rem;color:#1b1f24}
h1{margin:.8rem 0 .2rem}h2{margin-top:2rem;border-bottom:1px solid #d0d7de}
code,pre{font:12.5px ui-monospace,monospace}pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;white-space:pre-wrap}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:2px 6px;vertical-align:top}
th{background:#f6f8fa;cursor:pointer;user-select:none}th[aria-sort=ascending]::after{content:" ▲"}
th[aria-sort=descending]::after{content:" ▼"}th.check{writing-mode:vertical-rl;transform:rotate(180deg);
font-weight:normal;white-space:nowrap;padding:6px 2px}.scroll{overflow:auto;max-height:80vh}
td.cell{text-align:center;min-width:1.2em}#matrix td:first-child{white-space:nowrap}
.passed{background:#dafbe1}.failed{background:#ffd8d3}.pending{background:#d6f0ff}
.error{background:#f5d0fe}.skipped{background:#fff5c2}.verdict{display:inline-block;padding:2px 10px;
border-radius:4px;font-weight:bold;text-transform:uppercase}dl.facts{display:grid;grid-template-columns:max-content 1fr;
gap:0 1rem}dl.facts dt{font-weight:bold}article{border-left:4px solid #cf222e;padding:0 .8rem;margin:1rem 0}
article.error{border-color:#8250df}article.pending{border-color:#0969da}article.finding{background:#fffafa}
details summary{cursor:pointer}.num{text-align:right}
"""

SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, column) {
    th.tabIndex = 0;
    function sort() {
      var up = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var numeric = th.dataset.type === "num";
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.key, y = b.cells[column].dataset.key;
        var c = numeric ? parseFloat(x) - parseFloat(y) : (x < y ? -1 : x > y ? 1 : 0);
        return up ? c : -c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
  });
});
"""


def esc(value: object) -> str:
    """Text from a run as HTML: secrets masked, control characters written out, markup escaped."""
    return html.escape(showable(redact.text(str(value))), quote=True)


def render(run: RunResult, folder: Path | None = None) -> str:
    from gpuready.core import __version__

    grid = matrix(run)
    counts = run.counts()
    title = f"gpuready {run.command}: {run.status}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No fetch of any kind: a report opened from a ticket must not call anywhere.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>gpuready {esc(run.command)}</h1>",
        f'<p>verdict: <span id="verdict" class="verdict {run.status}">{run.status}</span> '
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + f" check(s) on {len(grid.hosts)} host(s)</p>",
    ]
    if run.aborted:
        parts.append(f'<p id="aborted" class="error">aborted: {esc(run.aborted)}</p>')
    parts.append(
        '<nav><a href="#hosts">hosts</a> · <a href="#failures">failures</a> · <a href="#pending">pending</a> · '
        '<a href="#skipped">skipped</a> · '
        '<a href="#figures">figures</a> · <a href="#plots">plots</a> · <a href="#run">run</a></nav>'
    )
    parts += _matrix(grid)
    parts += _failures(run, grid)
    parts += _pending(run)
    parts += _skipped(run)
    parts += _figures(run, grid)
    parts += _plots(folder)
    parts += _facts(run, grid, folder, __version__)
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"


def _names(hosts: list[str], shown: int = NAMES_SHOWN) -> str:
    """Host names, the first few in line and the rest behind a "+N more" that opens."""
    head = ", ".join(esc(h) for h in hosts[:shown])
    if len(hosts) <= shown:
        return head
    rest = ", ".join(esc(h) for h in hosts[shown:])
    return f"{head} <details><summary>+{len(hosts) - shown} more</summary>{rest}</details>"


def sort_key(name: str) -> str:
    """A host name the page's string sort puts in natural order: numbers zero-padded (gn2 before gn10)."""
    return "".join(f"{part:012d}" if isinstance(part, int) else part for part in natural(name))


def _matrix(grid: Matrix) -> list[str]:
    grouped = len(grid.rows) < len(grid.hosts)
    out = [
        '<section id="hosts"><h2>Verdict per host and check</h2>',
        f"<p>{len(grid.hosts)} host(s), {len(grid.check_ids)} check(s)"
        + (f", in {len(grid.rows)} row(s): hosts with the same verdict on every check share a row" if grouped else "")
        + ". Click a heading to sort. ✓ passed, ✗ failed, ! error, … pending, – skipped, blank: not run.</p>",
        '<div class="scroll"><table id="matrix" class="sortable"><thead><tr>',
        "<th>hosts</th><th data-type=num>count</th><th data-type=num>verdict</th>",
    ]
    # Failing columns first, then pending ones, each group in run order: at 36 checks the grid is wider than a
    # screen, and a failing host must show its failure without scrolling sideways past its passes.
    columns = sorted(range(len(grid.check_ids)), key=lambda k: (_column_rank(grid, k), k))
    out += [
        f'<th class="check" data-type=num title="{esc(grid.check_ids[k])}">{esc(grid.check_ids[k])}</th>'
        for k in columns
    ]
    out.append("</tr></thead><tbody>")
    for row in grid.rows:
        first = sorted(row.hosts, key=natural)
        key = esc(sort_key(first[0]))
        cells = [
            f'<tr class="{row.verdict}"><td data-key="{key}">{_names(first)}</td>',
            f'<td class="num" data-key="{len(row.hosts)}">{len(row.hosts)}</td>',
            f'<td class="{row.verdict}" data-key="{SEVERITY[row.verdict]}">{row.verdict}</td>',
        ]
        for check_id, status in ((grid.check_ids[k], row.statuses[k]) for k in columns):
            tip = ""
            if len(row.hosts) == 1 and status in (FAILED, ERROR, SKIPPED):
                tip = f' title="{esc(grid.cells[(check_id, row.hosts[0])].message)}"'
            cells.append(f'<td class="cell {status}" data-key="{SEVERITY[status]}"{tip}>{GLYPH[status]}</td>')
        out.append("".join(cells) + "</tr>")
    out.append("</tbody></table></div></section>")
    return out


def _column_rank(grid: Matrix, k: int) -> int:
    """0: a column where some host failed or could not run the check; 1: pending somewhere; 2: the rest."""
    statuses = {row.statuses[k] for row in grid.rows}
    return 0 if statuses & {FAILED, ERROR} else 1 if PENDING in statuses else 2


def _failures(run: RunResult, grid: Matrix) -> list[str]:
    out = ['<section id="failures"><h2>Failures</h2>']
    groups = [(s.id, g) for s in summarize(run) for g in s.groups]
    if not groups:
        out.append("<p>None: no check failed or erred.</p>")
    for check_id, g in sorted(groups, key=lambda x: (SEVERITY[x[1].status], -len(x[1].hosts))):
        first: Check = grid.cells[(check_id, g.hosts[0])]
        out += [
            f'<article class="{g.status} finding"><h3>{esc(check_id)}: {g.status} on {len(g.hosts)} host(s)</h3>',
            f'<p class="message">{esc(g.message)}</p>',
            f"<p>hosts: {_names(g.hosts)}</p>",
        ]
        if first.evidence:
            more = " (each host's evidence is in summary.json)" if len(g.hosts) > 1 else ""
            out.append(
                f"<details><summary>evidence from {esc(first.host)}{more}</summary>"
                f"<pre>{esc(first.evidence)}</pre></details>"
            )
        if g.remedy:
            out += _remedy("remedy", group_remedy(run, g))
        out.append("</article>")
    out.append("</section>")
    return out


def _remedy(label: str, text: str) -> list[str]:
    """A remedy as prose, then the gpuready commands it names as code, each running as pasted."""
    commands = remedy_commands(text)
    out = [f'<p class="remedy">{label}: {esc(text)}</p>']
    if commands:
        out.append(f'<pre class="remedy"><code>{esc(chr(10).join(commands))}</code></pre>')
    return out


def _pending(run: RunResult) -> list[str]:
    """What a reboot or an action outside gpuready finishes, by reason, with what to do (as the terminal's "left
    to do" says it)."""
    groups = pendings(run)
    out = ['<section id="pending"><h2>Pending: what a reboot or an action outside gpuready finishes</h2>']
    if not groups:
        out.append("<p>Nothing is pending.</p>")
    for g in groups:
        out += [
            f'<article class="pending"><h3>{esc(", ".join(g.check_ids))}: pending on {len(g.hosts)} host(s)</h3>',
            f'<p class="message">{esc(g.reason)} ({g.count} check(s))</p>',
            f"<p>hosts: {_names(g.hosts)}</p>",
        ]
        for r in g.remedies:
            out += _remedy("left to do", todo_remedy(run, r))
        out.append("</article>")
    out.append("</section>")
    return out


def _skipped(run: RunResult) -> list[str]:
    out = ['<section id="skipped"><h2>Skipped: what was not tested, and why</h2>']
    groups = skips(run)
    if not groups:
        out.append("<p>Nothing was skipped.</p>")
    else:
        out.append('<table id="skips" class="sortable"><thead><tr><th>reason</th><th>checks</th>')
        out.append("<th data-type=num>hosts</th><th>which</th></tr></thead><tbody>")
        for g in groups:
            checks = ", ".join(esc(i) for i in g.check_ids)
            out.append(
                f'<tr><td data-key="{esc(g.reason)}">{esc(g.reason)}</td><td data-key="{esc(g.check_ids[0])}">'
                f'{checks}</td><td class="num" data-key="{len(g.hosts)}">{len(g.hosts)}</td>'
                f'<td data-key="">{_names(g.hosts)}</td></tr>'
            )
        out.append("</tbody></table>")
    out.append("</section>")
    return out


def _figures(run: RunResult, grid: Matrix) -> list[str]:
    """Measured figures against their references: performance checks' figures, training's sizes."""
    out = ['<section id="figures"><h2>Measured figures against their references</h2>']
    checks = [c for c in grid.cells.values() if is_figure(c)]
    training = run.metrics.get("training") if isinstance(run.metrics.get("training"), dict) else None
    if not checks and not training:
        out.append("<p>This run measured no figures.</p></section>")
        return out
    if training:
        out += _training(training)
    every = len(grid.hosts) <= EVERY_HOST_UP_TO
    found = [f for c in checks for f in figures(c)]
    if found:
        out += _figure_summary(found)
    shown = sorted(
        (c for c in checks if every or c.status != PASSED), key=lambda c: (SEVERITY[c.status], c.id, natural(c.host))
    )
    left = shown[FIGURE_ROWS:] if not every else []
    shown = shown[: len(shown) - len(left)]
    if shown:
        title = "every measured check" if every else "checks that did not pass, with their figures"
        out.append(f"<h3>{title}</h3>")
        out.append('<table id="measured" class="sortable"><thead><tr><th>host</th><th>check</th>')
        out.append("<th data-type=num>verdict</th><th>result</th><th>figures and references</th></tr></thead><tbody>")
        for c in shown:
            out.append(
                f'<tr><td data-key="{esc(c.host)}">{esc(c.host)}</td><td data-key="{esc(c.id)}">{esc(c.id)}</td>'
                f'<td class="{c.status}" data-key="{SEVERITY[c.status]}">{c.status}</td>'
                f'<td data-key="">{esc(c.message)}</td><td data-key="">{_evidence(c)}</td></tr>'
            )
        out.append("</tbody></table>")
    if left:
        out.append(f'<p id="figures-left">{len(left)} more that did not pass: every one is in summary.json.</p>')
    out.append("</section>")
    return out


def _evidence(check: Check) -> str:
    if not check.evidence:
        return ""
    lines = check.evidence.count("\n") + 1
    return f"<details><summary>{lines} line(s)</summary><pre>{esc(check.evidence)}</pre></details>"


def _figure_summary(found: list[Figure]) -> list[str]:
    """Per check and unit across every host: how many figures, the lowest (and where), median, highest."""
    by_check: dict[tuple[str, str], list[Figure]] = {}
    for f in found:
        by_check.setdefault((f.check_id, f.unit), []).append(f)
    out = [
        "<h3>per check, over every host</h3>",
        '<table id="figure-summary" class="sortable"><thead><tr><th>check</th><th data-type=num>figures</th>',
        "<th data-type=num>lowest</th><th data-type=num>median</th><th data-type=num>highest</th><th>unit</th>",
        "<th>lowest at</th><th>references</th></tr></thead><tbody>",
    ]
    for (check_id, unit), group in sorted(by_check.items()):
        values = [f.value for f in group]
        low = min(group, key=lambda f: f.value)
        references = sorted({f.reference for f in group if f.reference}) or ["none (judged against mates only)"]
        out.append(
            f'<tr><td data-key="{esc(check_id)}">{esc(check_id)}</td>'
            + "".join(
                f'<td class="num" data-key="{v:g}">{v:.4g}</td>'
                for v in (len(values), min(values), statistics.median(values), max(values))
            )
            + f'<td data-key="{esc(unit)}">{esc(unit)}</td><td data-key="">{esc(low.host)} {esc(low.label)}</td>'
            + f'<td data-key="">{"<br>".join(esc(r) for r in references)}</td></tr>'
        )
    out.append("</tbody></table>")
    return out


def _training(training: dict[str, Any]) -> list[str]:
    out = ["<h3>training</h3>", '<dl class="facts">']
    for key, value in training.items():
        if key != "sizes" and not isinstance(value, dict | list):
            out.append(f"<dt>{esc(key)}</dt><dd>{esc(value)}</dd>")
    out.append("</dl>")
    sizes = [r for r in training.get("sizes") or [] if isinstance(r, dict)]
    if sizes:
        cpu = str(training.get("device", "")).startswith("CPU")
        columns = [
            ("workers", "CPU workers" if cpu else "GPUs"),
            ("images_per_second", "images/s"),
            ("images_per_second_per_worker", "images/s per worker"),
            ("efficiency", "weak-scaling efficiency"),
            ("step_time_median_s", "median step (s)"),
        ]
        out.append('<table id="training-sizes" class="sortable"><thead><tr>')
        out += [f"<th data-type=num>{esc(label)}</th>" for _, label in columns]
        out.append("</tr></thead><tbody>")
        for row in sizes:
            cells = []
            for key, _ in columns:
                value = row.get(key)
                shown = "—" if value is None else f"{100 * value:.1f}%" if key == "efficiency" else f"{value:g}"
                sort = value if isinstance(value, int | float) else -1
                cells.append(f'<td class="num" data-key="{sort}">{esc(shown)}</td>')
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</tbody></table>")
    return out


def _plots(folder: Path | None) -> list[str]:
    out = ['<section id="plots"><h2>Plots</h2>']
    pngs = sorted(folder.glob("*.png")) if folder else []
    if not pngs:
        out.append("<p>This run drew no plots.</p>")
    for png in pngs:
        data = png.read_bytes()
        if len(data) > PLOT_LIMIT or data[:8] != b"\x89PNG\r\n\x1a\n":
            out.append(f"<p>{esc(png.name)} (in the run folder; too large to embed)</p>")
            continue
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        out.append(
            f'<figure><img src="{uri}" alt="{esc(png.name)}" style="max-width:100%">'
            f"<figcaption>{esc(png.name)}</figcaption></figure>"
        )
    out.append("</section>")
    return out


def _facts(run: RunResult, grid: Matrix, folder: Path | None, version: str) -> list[str]:
    command_line = ""
    if folder and (folder / "command.txt").is_file():
        command_line = (folder / "command.txt").read_text(errors="replace").strip()
    facts = [
        ("gpuready version", version),
        ("command", command_line or f"gpuready {run.command}"),
        ("inventory", run.inventory or "(none)"),
        ("started", run.started),
        ("finished", run.finished),
        ("artifacts", run.artifacts),
    ]
    out = ['<section id="run"><h2>The run</h2><dl class="facts">']
    out += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts]
    out.append(f"<dt>hosts ({len(grid.hosts)})</dt><dd>{_names(sorted(grid.hosts, key=natural), 20)}</dd>")
    scalars = {
        k: v for k, v in redact.structure(run.metrics).items() if not isinstance(v, dict | list) and v is not None
    }
    if scalars:
        out.append("<dt>figures</dt><dd>" + "<br>".join(f"{esc(k)}: {esc(v)}" for k, v in scalars.items()) + "</dd>")
    out.append("</dl></section>")
    return out
