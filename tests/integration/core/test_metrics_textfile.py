"""``--metrics``: the textfile node_exporter's textfile collector reads, judged by Prometheus's own promtool."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from gpuready.core import figures
from gpuready.core.report.metrics import render
from gpuready.core.results import RunResult, failed, passed, skipped
from tests.conftest import ROOT, gpuready
from tests.promtool import check_metrics

LOCAL = ROOT / "inventories" / "local"
SERIES = re.compile(r"^(?P<name>[a-z0-9_]+)\{(?P<labels>.*)\} (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    found = []
    for line in text.splitlines():
        match = SERIES.match(line)
        if match and match["name"] == name:
            found.append((dict(LABEL.findall(match["labels"])), float(match["value"])))
    return found


def test_validate_writes_one_prom_file_that_promtool_accepts_with_every_check(tmp_path: Path) -> None:
    folder, runs = tmp_path / "textfile", tmp_path / "runs"
    folder.mkdir()
    (folder / "other.prom").write_text("# another job's file stays as it is\n")
    done = gpuready("validate", "gpu-node", "-i", str(LOCAL), "--artifacts", str(runs), "--metrics", str(folder))
    assert done.returncode in (0, 1), done.stderr
    path = folder / "gpuready_validate_gpu_node.prom"
    # the file whole, nothing else left beside it (the temporary file was renamed), readable by node_exporter
    assert sorted(p.name for p in folder.iterdir()) == ["gpuready_validate_gpu_node.prom", "other.prom"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644 & ~umask
    text = path.read_text()
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [summary_path] = runs.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    results = {(s["check"], s["host"], s["status"]) for s, _ in series(text, "gpuready_check_results")}
    assert results == {(c["id"], c["host"], c["status"]) for c in summary["checks"]}
    assert all(s["command"] == "validate gpu-node" for s, _ in series(text, "gpuready_check_results"))
    counts = {s["status"]: v for s, v in series(text, "gpuready_run_checks")}
    assert counts == {status: float(n) for status, n in summary["counts"].items()}
    [state] = [s["status"] for s, v in series(text, "gpuready_run_status") if v == 1]
    assert state == summary["status"]
    assert "# TYPE gpuready_run_end_timestamp_seconds gauge" in text


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("metrics.txt", "node_exporter's textfile collector reads only *.prom files"),
        ("missing/metrics.prom", "no folder"),
        ("", "empty"),
    ],
)
def test_a_metrics_path_the_collector_would_not_read_is_refused_before_the_run(
    tmp_path: Path, value: str, why: str
) -> None:
    runs = tmp_path / "runs"
    target = str(tmp_path / value) if value else ""
    done = gpuready("validate", "gpu-node", "-i", str(LOCAL), "--artifacts", str(runs), "--metrics", target)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("gpuready: error: Invalid value for '--metrics'") and why in line
    assert not runs.exists()


def _awkward_run() -> RunResult:
    """Names a real site has and the text format must escape: quotes, backslashes, line feeds, non-ASCII."""
    run = RunResult(command="validate gpu-node", inventory='C:\\sites\\"lab"\nb')
    run.add(
        passed("gpu.count", 'gn"01'),
        failed("gpu.count", "gn\\02", "3 GPUs, expected 4"),
        skipped("diag.dcgm", "gn\n03", "DCGM not installed"),
        passed("vsphere.passthrough", "vm-ä1"),
        passed("vsphere.passthrough", "vm-ä1"),
    )
    figures.record(run, "memory_bandwidth", "GB/s", 1555.2, host='gn"01', gpu=0, check="perf.memory_bandwidth")
    figures.record(run, "matmul", "TFLOP/s", 289.5, host="gn\\02", gpu=1, check="perf.matmul")
    figures.record(run, "training", "images/s", 812.5, host="c4140-01..c4140-02", workers=8, device="GPU")
    figures.record(run, "training_scaling_efficiency", "ratio", 0.968, host="c4140-01..c4140-02", workers=8)
    run.finished = run.started
    return run


def test_awkward_names_are_escaped_so_promtool_parses_and_lints_clean() -> None:
    text = render(_awkward_run())
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr + text
    assert 'host="gn\\"01"' in text and 'host="gn\\\\02"' in text and 'host="gn\\n03"' in text
    # two results of one check on one host are one series counting both (a repeated series is refused)
    assert series(text, "gpuready_check_results")[-1] == (
        {"command": "validate gpu-node", "check": "vsphere.passthrough", "host": "vm-ä1", "status": "passed"},
        2.0,
    )


def test_figures_are_written_in_base_units_per_host_and_gpu() -> None:
    text = render(_awkward_run())
    [(labels, value)] = series(text, "gpuready_memory_bandwidth_bytes_per_second")
    assert value == pytest.approx(1555.2e9) and labels["gpu"] == "0" and labels["check"] == "perf.memory_bandwidth"
    [(_, flops)] = series(text, "gpuready_matmul_flops")
    assert flops == pytest.approx(289.5e12)
    [(labels, images)] = series(text, "gpuready_training_images_per_second")
    assert images == 812.5 and labels["workers"] == "8" and labels["device"] == "GPU"
    [(_, ratio)] = series(text, "gpuready_training_scaling_efficiency_ratio")
    assert ratio == 0.968


def test_the_metrics_textfile_counts_pending_and_promtool_accepts_it() -> None:
    """A check left pending (ATS until each ESXi host reboots) is counted as such; the run passed."""
    from gpuready.core.results import PENDING
    from tests.unit.core.test_pending import provision_run

    text = render(provision_run())
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    counts = {s["status"]: v for s, v in series(text, "gpuready_run_checks")}
    assert counts[PENDING] == 2 and counts["skipped"] == 1
    [state] = [s["status"] for s, v in series(text, "gpuready_run_status") if v == 1]
    assert state == "passed"
    results = {(s["check"], s["status"]): v for s, v in series(text, "gpuready_check_results")}
    assert results[("vsphere.ats_reboot", PENDING)] == 2
