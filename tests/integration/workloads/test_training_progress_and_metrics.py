"""`validate training`: each size says when it starts and when it ends, and `--metrics` writes every size's
figures, labelled CPU, in a textfile Prometheus's promtool accepts. A real DDP sweep on this machine's CPU,
shared with test_pytorch_run.py (conftest.py)."""

from __future__ import annotations

import json
import re
import socket

import pytest

from tests.integration.core.test_metrics_textfile import series
from tests.integration.workloads.conftest import Sweep
from tests.promtool import check_metrics

pytestmark = pytest.mark.slow


def test_each_size_prints_its_start_and_end_and_its_figures_go_to_the_metrics_file(pytorch_cpu_sweep: Sweep) -> None:
    done, runs, prom = pytorch_cpu_sweep.done, pytorch_cpu_sweep.runs, pytorch_cpu_sweep.metrics
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("training densenet121 on ")]
    ends = [
        i
        for i, line in enumerate(lines)
        if re.fullmatch(r"training on \d CPU workers?: done in \d+s, [\d.]+ images/s", line)
    ]
    assert len(starts) == len(ends) == 2, done.stderr
    assert starts[0] < ends[0] < starts[1] < ends[1]  # each size ends before the next one starts
    assert "1 CPU worker:" in lines[ends[0]] and "2 CPU workers:" in lines[ends[1]]

    text = prom.read_text()
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [summary_path] = runs.glob("*/summary.json")
    sizes = {row["workers"]: row for row in json.loads(summary_path.read_text())["metrics"]["training"]["sizes"]}
    images = {int(s["workers"]): (s, v) for s, v in series(text, "gpuready_training_images_per_second")}
    assert set(images) == {1, 2}
    for workers, (labels, value) in images.items():
        assert value == sizes[workers]["images_per_second"]
        assert labels["device"] == "CPU" and labels["framework"] == "pytorch" and labels["model"] == "densenet121"
        # the size's figure and the line the terminal printed for it agree
        assert f"{value:.1f} images/s" in lines[ends[workers - 1]]
    efficiency = {int(s["workers"]): v for s, v in series(text, "gpuready_training_scaling_efficiency_ratio")}
    assert efficiency == {n: row["efficiency"] for n, row in sizes.items()}
    # Each worker's own images/s, by rank and host (no GPU label: the workers ran on the CPU).
    found = series(text, "gpuready_training_rank_images_per_second")
    ranks = {(int(s["workers"]), int(s["rank"])): (s, v) for s, v in found}
    assert set(ranks) == {(1, 0), (2, 0), (2, 1)}
    for (workers, rank), (labels, value) in ranks.items():
        [worker] = [r for r in sizes[workers]["ranks"] if r["rank"] == rank]
        assert value == worker["images_per_second"] > 0
        assert labels["host"] == socket.gethostname() and labels["device"] == "CPU" and "gpu" not in labels
    for workers, row in sizes.items():
        per_rank = sum(v for (n, _), (_, v) in ranks.items() if n == workers)
        assert per_rank == pytest.approx(row["images_per_second"], abs=0.01)
