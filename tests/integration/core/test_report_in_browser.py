"""report.html in a real browser: real runs of the lab rendered by headless Chromium with networking cut off,
screenshotted (kept under the folder the tests print) and judged on the DOM, at 10 and at 1,000 hosts."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuready.core.report.hosts import natural
from tests.browser import Dom, Element, dom, screenshot, shots_folder
from tests.conftest import ModuleTmp, gpuready, require
from tests.integration.node.conftest import can_make_namespaces

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: Ten of the nodes lab's profiles: three healthy machines and seven with one real fault each.
PROFILES = "v100-x4,a100-x4,h100-x8,ecc-errors,driver-mismatch,missing-gpu,nouveau,nvlink-down,throttle,busy-gpu"
#: A page of 1,000 hosts stays one to mail and open at once.
MAX_BYTES_AT_1000 = 1_000_000


@pytest.fixture(scope="module")
def lab_run(module_tmp: ModuleTmp) -> Iterator[dict[str, object]]:
    """`validate gpu-node --output json` on the nodes lab's ten replayed hosts: its run folder and stdout."""
    require(can_make_namespaces(), "needs root and `ip netns` (network namespaces)")
    root = module_tmp("lab-report")
    lab = ["--lab-dir", str(root / "lab")]
    up = gpuready(
        "lab", "up", "--components", "nodes", "--set", f"nodes.profiles={PROFILES}",
        "--set", f"nodes.prefix=gh{os.getpid() % 100000}", *lab,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        inventory = up.stdout.strip().splitlines()[-1]
        done = gpuready("validate", "gpu-node", "-i", inventory, "--artifacts", str(root / "runs"), "--output", "json")
        (folder,) = (root / "runs").iterdir()
        yield {"folder": folder, "done": done, "runs": root / "runs"}
    finally:
        gpuready("lab", "down", *lab)


def matrix_rows(page: Dom) -> list[list[Element]]:
    table = page.root.by_id("matrix")
    (body,) = table.find_all("tbody")
    return [row.find_all("td") for row in body.find_all("tr")]


def assert_nothing_fetched(page: Dom) -> None:
    """Every address in the page is the page's own (an anchor) or inline data: nothing to fetch."""
    outside = [u for u in page.urls if not u.startswith(("#", "data:"))]
    assert not outside, outside[:5]
    assert not page.root.find_all("link") and not [s for s in page.root.find_all("script") if "src" in s.attrs]


def assert_sorts(report: Path, heading: int, key: object) -> None:
    """A click on heading number ``heading`` orders the matrix's rows by ``key`` of their cells, a second
    click reverses it."""
    click = f'document.querySelectorAll("#matrix thead th")[{heading}].click();'
    once = [key(cells) for cells in matrix_rows(dom(report, click))]
    assert once == sorted(once), once
    twice = [key(cells) for cells in matrix_rows(dom(report, click * 2))]
    assert twice == sorted(twice, reverse=True), twice
    assert once != twice


def test_ten_hosts_in_chromium(lab_run: dict[str, object], tmp_path: Path) -> None:
    folder = lab_run["folder"]
    assert isinstance(folder, Path)
    report = folder / "report.html"
    shots = shots_folder(tmp_path)
    screenshot(report, shots / "gpu-node-10-hosts.png", height=3200)
    page = dom(report)
    assert_nothing_fetched(page)
    assert page.root.by_id("verdict").all_text == "failed"
    rows = matrix_rows(page)
    hosts = [h for cells in rows for h in re.split(r"[, ]+", cells[0].all_text) if "-" in h]
    assert len(hosts) == 10 and sum(int(cells[1].attrs["data-key"]) for cells in rows) == 10
    # Healthy hosts are named with their verdict, failing ones first.
    verdicts = {cells[0].all_text: cells[2].all_text for cells in rows}
    assert [v for h, v in verdicts.items() if h.startswith(("v100", "a100", "h100"))] == ["passed"] * 3
    assert [cells[2].all_text for cells in rows][:7] == ["failed"] * 7
    throttle = next(cells for cells in rows if cells[0].all_text.startswith("throttle"))
    check_ids = [th.attrs.get("title", th.all_text) for th in page.root.by_id("matrix").find_all("th")]
    column = check_ids.index("gpu.throttle")
    assert throttle[column].all_text == "✗" and "hw_thermal_slowdown" in throttle[column].attrs["title"]
    # Sorting, by the hosts column and by a check's column (worst first).
    assert_sorts(report, 0, lambda cells: natural(cells[0].all_text.split(",")[0]))
    assert_sorts(report, column, lambda cells: int(cells[column].attrs["data-key"]))
    # Each failure with its hosts, evidence and remedy.
    findings = {a.find_all("h3")[0].all_text: a for a in page.root.find_all("article", **{"class": "finding"})}
    throttled = findings["gpu.throttle: failed on 1 host(s)"]
    assert "hw_thermal_slowdown" in throttled.all_text and "throttle-" in throttled.all_text
    # A remedy that names no gpuready command is prose, not a code block to paste.
    assert "nvidia-smi -q -d PERFORMANCE" in throttled.find_all("p", **{"class": "remedy"})[0].all_text
    assert throttled.find_all("details")[0].find_all("pre")[0].all_text.strip()  # evidence
    # What was not tested and why, with how many hosts.
    skips = page.root.by_id("skips").all_text
    assert "DCGM not installed" in skips and "diag.dcgm" in skips
    # Measured figures against their references, the busy GPU's host-to-device copy among them.
    figures = page.root.by_id("figures").all_text
    assert "perf.h2d_bandwidth" in figures and "lower bound" in figures and "is busy" in figures
    # The run: version, inventory, command.
    facts = page.root.by_id("run").all_text
    from gpuready.core import __version__

    assert __version__ in facts and "inventory" in facts and "validate gpu-node" in facts


def test_the_verdict_as_json_and_again_from_the_artifacts(lab_run: dict[str, object]) -> None:
    folder, done, runs = lab_run["folder"], lab_run["done"], lab_run["runs"]
    assert isinstance(done, subprocess.CompletedProcess) and isinstance(folder, Path)
    assert done.returncode == 1, done.stderr
    printed = json.loads(done.stdout)  # stdout is JSON and only JSON
    summary = json.loads((folder / "summary.json").read_text())
    assert printed["status"] == summary["status"] == "failed" and printed["counts"] == summary["counts"]
    assert printed["artifacts"] == str(folder)
    assert "FAILED" in done.stderr  # the verdict for a person went to stderr
    again = gpuready("report", "show", "--artifacts", str(runs))
    assert again.returncode == 1, again.stderr
    assert "FAILED" in again.stdout and "throttle-" in again.stdout and f"report.html: {folder}" in again.stdout
    scripted = gpuready("report", "show", str(folder), "--json")
    assert scripted.returncode == 1 and json.loads(scripted.stdout)["checks"] == summary["checks"]
    md = (folder / "report.md").read_text()
    hosts = md.split("\n## Hosts\n")[1]
    assert "| passed | " in hosts and "v100-x4-" in hosts and "\n## Skipped\n" in hosts
    assert "- remedy: Check cooling, airflow and power supply" in md


def thousand_hosts(folder: Path, into: Path) -> Path:
    """The ten real hosts' results each repeated for 100 hosts named gn0..gn999 (a host's name in its messages
    and evidence renamed with it), written by gpuready's own report writers."""
    from gpuready.core.report import writers
    from gpuready.core.results import Check, RunResult

    run = RunResult.from_dict(json.loads((folder / "summary.json").read_text()))
    by_host: dict[str, list[Check]] = {}
    for check in run.checks:
        by_host.setdefault(check.host, []).append(check)
    originals = sorted(by_host)
    big = RunResult(command=run.command, inventory=run.inventory, started=run.started)
    for n in range(1000):
        original = originals[n % len(originals)]
        name = f"gn{n}"  # unpadded: gn2 sorts before gn10 only in natural order
        for c in by_host[original]:
            fields = {k: v.replace(original, name) for k, v in vars(c).items() if k not in ("id", "status")}
            big.add(Check(id=c.id, status=c.status, **fields))
    into.mkdir()
    writers.write_all(big, into)
    return into / "report.html"


def test_a_thousand_hosts_in_chromium(lab_run: dict[str, object], tmp_path: Path) -> None:
    folder = lab_run["folder"]
    assert isinstance(folder, Path)
    report = thousand_hosts(folder, tmp_path / "run-1000")
    size = report.stat().st_size
    print(f"report.html at 1000 hosts: {size} bytes")
    assert size < MAX_BYTES_AT_1000
    screenshot(report, shots_folder(tmp_path) / "gpu-node-1000-hosts.png", height=2400)
    page = dom(report)
    assert_nothing_fetched(page)
    rows = matrix_rows(page)
    # Hosts with the same verdict on every check share a row: ten rows of 100 hosts, not a thousand.
    assert len(rows) == 10 and [int(cells[1].attrs["data-key"]) for cells in rows] == [100] * 10
    opened = [d for cells in rows for d in cells[0].find_all("details")]
    assert len(opened) == 10 and "+95 more" in opened[0].all_text
    assert_sorts(report, 0, lambda cells: natural(cells[0].all_text.split(",")[0]))
    assert_sorts(report, 2, lambda cells: int(cells[2].attrs["data-key"]))
    findings = page.root.find_all("article", **{"class": "finding"})
    titles = [a.find_all("h3")[0].all_text for a in findings]
    assert "gpu.throttle: failed on 100 host(s)" in titles
    figures = page.root.by_id("figure-summary").all_text
    assert "perf.h2d_bandwidth" in figures and "lower bound" in figures


@pytest.mark.parametrize(
    ("component", "command"),
    [("vsphere", "validate vsphere"), ("vsphere", "provision cluster"), ("kubernetes", "validate cluster")],
)
def test_lab_runs_in_chromium(component: str, command: str, tmp_path: Path) -> None:
    """validate vsphere and provision cluster --check on the vSphere lab (vcsim), validate cluster on the
    Kubernetes lab (a real control plane with kwok nodes)."""
    lab = ["--lab-dir", str(tmp_path / "lab")]
    up = gpuready("lab", "up", "--components", component, *lab)
    require(up.returncode == 0, f"the {component} lab did not start: {up.stderr.strip()[-300:]}")
    try:
        inventory = up.stdout.strip().splitlines()[-1]
        password_file = tmp_path / "lab" / "vsphere" / "password"
        password = password_file.read_text().strip() if component == "vsphere" else "no-password-here"
        extra = ["--tags", "vsphere", "--check"] if command == "provision cluster" else []
        done = gpuready(
            *command.split(), "-i", inventory, *extra, "--artifacts", str(tmp_path / "runs"), "--output", "json",
            env={"GPUREADY_VCENTER_PASSWORD": password},
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        status = json.loads(done.stdout)["status"]
    finally:
        gpuready("lab", "down", *lab)
    (folder,) = (tmp_path / "runs").iterdir()
    report = folder / "report.html"
    assert password not in report.read_text()
    screenshot(report, shots_folder(tmp_path) / f"{command.replace(' ', '-')}.png")
    page = dom(report)
    assert_nothing_fetched(page)
    assert page.root.by_id("verdict").all_text == status
    rows = matrix_rows(page)
    assert rows and inventory in page.root.by_id("run").all_text
    if status == "failed":
        assert page.root.find_all("article", **{"class": "finding"})
    if command == "provision cluster":
        # ATS is set, pending until each ESXi host reboots: one reason, and what to do for each host.
        [pending] = page.root.by_id("pending").find_all("article", **{"class": "pending"})
        assert "vsphere.ats_reboot: pending" in pending.all_text
        todo = " ".join(p.all_text for p in pending.find_all("p", **{"class": "remedy"}))
        assert "put DC0_H0 in maintenance mode" in todo and "put DC0_H1" in todo


def test_a_training_run_in_chromium(tmp_path: Path) -> None:
    """A real CPU sweep (PyTorch DDP over Gloo, 1 and 2 workers): its table, its plot inline, labelled CPU."""
    import importlib.util

    require(
        importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"),
        "torch and torchvision not installed (make .venv/.stamp-torch)",
    )
    tiny = ["--framework", "pytorch", "--steps", "3", "--warmup-steps", "1", "--image-size", "32", "--batch-size", "4"]
    done = gpuready("validate", "training", "--cpu", "--gpus", "1,2", *tiny, "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stdout + done.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    report = folder / "report.html"
    screenshot(report, shots_folder(tmp_path) / "validate-training.png", height=2600)
    page = dom(report)
    assert_nothing_fetched(page)
    [plot] = [img for img in page.root.find_all("img") if img.attrs.get("alt") == "scaling.png"]
    assert plot.attrs["src"].startswith("data:image/png;base64,")
    sizes = page.root.by_id("training-sizes")
    headings = [th.all_text for th in sizes.find_all("th")]
    assert headings[0] == "CPU workers" and "weak-scaling efficiency" in headings
    assert [row.find_all("td")[0].all_text for row in sizes.find_all("tbody")[0].find_all("tr")] == ["1", "2"]
    figures = page.root.by_id("figures").all_text
    assert "training.2w" in figures and "CPU" in figures
