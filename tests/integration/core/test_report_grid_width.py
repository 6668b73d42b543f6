"""report.html at 1280 px in headless Chromium: the check grid puts failing columns first, so every failing host
shows its failure without scrolling sideways, however many checks pass."""

from __future__ import annotations

import json
from pathlib import Path

from gpuready.core.report import writers
from gpuready.core.results import RunResult, failed, passed, skipped
from gpuready.validate.node.checks import CATALOGUE
from tests.browser import dom, screenshot, shots_folder

#: Records, into the body's data-hidden attribute, each failing row whose failed cells all lie right of the window.
HIDDEN_FAILURES = """
const hidden = [];
for (const row of document.querySelectorAll('#matrix tbody tr')) {
  const cells = [...row.querySelectorAll('td.cell.failed, td.cell.error')];
  if (cells.length && cells.every(c => c.getBoundingClientRect().left >= window.innerWidth)) {
    hidden.push(row.querySelector('td').textContent);
  }
}
document.body.setAttribute('data-hidden', JSON.stringify(hidden));
document.body.setAttribute('data-width', String(document.querySelector('#matrix').scrollWidth));
"""


def _run() -> RunResult:
    """12 hosts, every check of the catalogue, the two faulty hosts failing only the last checks of the grid."""
    run = RunResult(command="validate gpu-node", inventory="inventories/site")
    ids = [d.id for d in CATALOGUE]
    for i in range(12):
        host = f"gn{i:02d}"
        for k, check_id in enumerate(ids):
            if i in (4, 9) and k >= len(ids) - 2 + (i == 9):
                run.add(failed(check_id, host, "below its mates", remedy="rerun"))
            elif k % 7 == 3:
                run.add(skipped(check_id, host, "nothing here measures it"))
            else:
                run.add(passed(check_id, host, "fine"))
    return run


def test_every_failing_host_shows_its_failure_at_1280_px(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    writers.write_all(_run(), folder)
    page = folder / "report.html"
    body = dom(page, then=HIDDEN_FAILURES).root.find_all("body")[0]
    assert int(body.attrs["data-width"]) > 1280  # the grid is wider than the window: the order is what helps
    assert json.loads(body.attrs["data-hidden"]) == []
    screenshot(page, shots_folder(tmp_path) / "gpu-node-failing-columns-first.png", height=1200)
