"""A run at 80 columns takes at most 40 lines in all, stdout and stderr, at any number of hosts, and still shows
each failing check with its remedy and every check id whole."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from rich.cells import cell_len

from gpuready.core.report import terminal, writers
from gpuready.core.results import RunResult, failed, passed, skipped
from gpuready.validate.node.checks import CATALOGUE
from tests.conftest import gpuready

SCREEN = {"COLUMNS": "80", "LINES": "50"}


def _local_fleet(folder: Path, n: int) -> Path:
    """``n`` names for this machine, in a node class that expects a GPU: every one fails where a GPU is missing."""
    (folder / "group_vars" / "all").mkdir(parents=True)
    hosts = {f"gn{i:03d}": {"ansible_connection": "local", "gpuready_node_class": "one"} for i in range(n)}
    (folder / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts}}))
    settings = {
        "node_classes": {"one": {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 1}},
        "driver": {"branch": "580"},
        "container_runtime": "none",
    }
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
    return folder


def test_a_run_over_many_hosts_and_its_progress_lines_fit_one_screen(tmp_path: Path) -> None:
    inventory = _local_fleet(tmp_path / "fleet", 24)
    done = gpuready(
        "validate",
        "gpu-node",
        "-i",
        str(inventory),
        "--artifacts",
        str(tmp_path / "runs"),
        "--skip",
        "perf.matmul_tflops",
        env=SCREEN,
    )
    assert done.returncode in (0, 1), done.stderr
    out, err = done.stdout.splitlines(), done.stderr.splitlines()
    assert len(out) + len(err) <= terminal.MAX_LINES, done.stderr + done.stdout
    assert len(err) <= 8, done.stderr  # a header, the first failing hosts, the quarters: not a line per host
    if done.returncode == 1:  # no GPU here: each failing check still has its remedy
        failing = [line for line in out if line.startswith("✗")]
        assert failing and sum(line.lstrip().startswith("→") for line in out) >= len(failing), done.stdout


def _twelve_hosts_ten_faults() -> RunResult:
    run = RunResult(command="validate gpu-node", inventory="gpuready-lab/nodes/inventory")
    faulty = [d for d in CATALOGUE if d.remedy][:10]
    hosts = [f"{p}-{i:02d}" for i, p in enumerate(["v100-x4", "a100-x4", "h100-x8", *("faulty",) * 9])]
    for i, host in enumerate(hosts):
        for j, d in enumerate(CATALOGUE):
            if i >= 3 and j < len(faulty) and d is faulty[(i - 3) % 9 + (j % 2)] and j % 3 == 0:
                run.add(failed(d.id, host, f"{d.what}: not so on {host}", remedy=d.remedy))
            elif j % 4 == 1:
                run.add(skipped(d.id, host, f"the node class does not ask for what {d.id} judges (setting: {j})"))
            else:
                run.add(passed(d.id, host, "fine"))
    for d in faulty:
        run.add(failed(d.id, hosts[-1], f"{d.what}: not so", remedy=d.remedy))
    return run


def test_twelve_hosts_failing_ten_checks_show_each_with_its_remedy_and_no_id_cut(tmp_path: Path) -> None:
    run = _twelve_hosts_ten_faults()
    folder = tmp_path / "runs" / "0001-20261128T120000Z-validate-gpu-node"
    folder.mkdir(parents=True)
    run.artifacts = str(folder)
    writers.write_all(run, folder)
    done = gpuready("report", "show", str(folder), env=SCREEN)
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert len(out) + len(done.stderr.splitlines()) <= terminal.MAX_LINES, done.stdout
    assert [
        line
        for line in out
        if cell_len(line) > 80 and not line.startswith(("artifacts:", "report.html:", "report.md:"))
    ] == []
    failing = sorted({c.id for c in run.checks if c.status == "failed"})
    assert len(failing) == 10
    for check_id in failing:
        [at] = [i for i, line in enumerate(out) if re.match(rf"✗ {re.escape(check_id)}\s", line)]
        assert out[at + 1].lstrip().startswith("→ "), (check_id, done.stdout)
    # Check ids are never cut: every id the verdict names is one the run has.
    ids = {c.id for c in run.checks}
    named = set(re.findall(r"\b(?:driver|gpu|node|topology|perf|diag|compute)\.[\w.]*", done.stdout))
    assert named <= ids, named - ids
    assert "…)" not in done.stdout
