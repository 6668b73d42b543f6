"""`validate training` and `report compare` as a user meets them: help, bad input, comparisons."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gpuready


def test_help_imports_no_tensorflow_horovod_or_matplotlib() -> None:
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom gpuready.core.cli import cli\n"
        "for args in (['--help'], ['validate', 'training', '--help'], ['report', 'compare', '--help']):\n"
        "    r = CliRunner().invoke(cli, args)\n    assert r.exit_code == 0, r.output\n"
        "heavy = sorted(m for m in ('tensorflow', 'horovod', 'matplotlib') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--gpus", "0"], "worker counts of 1 or more"),
        (["--gpus", "two"], "worker counts like"),
        (["--data", "/no/such/folder"], "no such folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], words: str, artifacts: Path) -> None:
    proc = gpuready("validate", "training", *args, "--artifacts", str(artifacts))
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuready: error: ") and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not list(artifacts.iterdir())  # nothing half-made left behind


def test_gpus_on_a_machine_without_them_are_refused_unless_cpu(artifacts: Path) -> None:
    no_gpu = {"PATH": "/usr/bin:/bin"}  # no nvidia-smi: this machine has no NVIDIA GPU
    proc = gpuready("validate", "training", "--gpus", "1,2", "--artifacts", str(artifacts), env=no_gpu)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        "gpuready: error: --gpus 2 on localhost, which has 0 GPUs (no nvidia-smi on this machine): one worker per "
        "GPU; run it on a GPU node, use --launcher ssh/slurm for more, or --cpu to train on the CPU on purpose"
    )
    assert not list(artifacts.iterdir())


def _training_run(folder: Path, figures: dict[int, float]) -> Path:
    folder.mkdir(parents=True)
    sizes = [{"workers": n, "images_per_second": v} for n, v in figures.items()]
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "command": "validate training",
                "metrics": {"training": {"launcher": "slurm", "where": "c4140-01", "sizes": sizes}},
            }
        )
    )
    return folder


def test_compare_gives_overhead_against_the_first_run(tmp_path: Path, artifacts: Path) -> None:
    # the shape of Dell's bare-metal vs Kubernetes study's finding: Kubernetes about 8% behind bare metal at 8 GPUs
    bare = _training_run(tmp_path / "bare", {1: 1000.0, 8: 7600.0})
    k8s = _training_run(tmp_path / "k8s", {1: 990.0, 8: 6992.0})
    proc = gpuready("report", "compare", f"{bare}=bare metal", f"{k8s}=kubernetes", "--artifacts", str(artifacts))
    assert proc.returncode == 0, proc.stderr
    (run,) = list(artifacts.iterdir())
    rows = json.loads((run / "summary.json").read_text())["metrics"]["comparison"]
    assert [(r["workers"], r["runs"][1]["overhead_percent"]) for r in rows] == [(1, 1.0), (8, 8.0)]
    assert "6992.0 (+8.0%)" in (run / "comparison.md").read_text()
    assert (run / "comparison.png").read_bytes()[:4] == b"\x89PNG"

    failing = gpuready("report", "compare", str(bare), str(k8s), "--max-overhead", "2", "--artifacts", str(artifacts))
    assert failing.returncode == 1
    assert "more than 2%" in failing.stdout


def test_compare_refuses_a_folder_that_is_not_a_training_run(tmp_path: Path, artifacts: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "summary.json").write_text(json.dumps({"command": "validate vsphere", "metrics": {}}))
    proc = gpuready("report", "compare", str(other), str(tmp_path / "missing"), "--artifacts", str(artifacts))
    assert proc.returncode == 2 and proc.stderr.startswith("gpuready: error: ") and "no training figures" in proc.stderr


def test_compare_says_when_setups_differ(tmp_path: Path) -> None:
    from gpuready.workloads.controller import compare

    a = _training_run(tmp_path / "a", {1: 100.0})
    b = _training_run(tmp_path / "b", {1: 90.0})
    summary = json.loads((b / "summary.json").read_text())
    summary["metrics"]["training"]["image_size"] = 64
    (b / "summary.json").write_text(json.dumps(summary))
    runs = [compare.load(str(a)), compare.load(f"{b}=small")]
    assert compare.setup_differences(runs) == ["small: image_size 64 (first: None)"]
    assert "Set-ups differ" in compare.markdown(compare.table(runs), runs)


def test_report_collect_refuses_files_without_results(tmp_path: Path) -> None:
    empty = tmp_path / "slurm-2w-7.out"
    empty.write_text("srun: error: node-a: task 0: Exited with exit code 1\n")
    done = gpuready("report", "collect", str(empty), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 2 and "no GPUREADY_RESULT lines" in done.stderr, done.stderr
    missing = gpuready("report", "collect", str(tmp_path / "nope.out"), "--artifacts", str(tmp_path / "runs"))
    assert missing.returncode == 2 and "nope.out: cannot read" in missing.stderr, missing.stderr
