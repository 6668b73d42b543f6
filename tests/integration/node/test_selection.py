"""`validate gpu-node --only` and `--skip`: families, the dependencies a selected check brings, and a mistyped
id or command answered with the closest one. Driven through the CLI on this machine, with the lab's replayed
GPU profiles first on PATH (lab/replay.py: real recordings, each profile's edits listed there)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpuready.lab import replay
from gpuready.validate.node.checks import CATALOGUE
from tests.conftest import gpuready
from tests.unit.core.test_bad_inputs import make_inventory, with_settings

#: The lab profile's PowerEdge C4140: 4x V100-SXM2 32 GB in a hybrid cube mesh, 6 NVLinks per GPU (lab/replay.py).
V100 = {"gpu_model": "Tesla V100-SXM2-32GB", "gpu_count": 4, "nvlink_links_per_gpu": 6}


def unwrapped(text: str) -> str:
    """The notes as one line each would read: they are wrapped to the terminal's width."""
    return " ".join(text.split())


def validate(tmp_path: Path, profile: str, *args: str) -> tuple[Any, dict[str, dict[str, str]]]:
    tools = replay.build(profile, tmp_path / "replay")
    hosts = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}}}
    inv = make_inventory(tmp_path, hosts=hosts, settings=with_settings(node_classes__v100=V100))
    runs = tmp_path / "runs"
    path = f"{tools}:{os.environ['PATH']}"  # the replayed tools first, as on a lab node
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), *args, env={"PATH": path})
    assert "Traceback" not in done.stdout + done.stderr
    summary = json.loads(next(runs.glob("*-validate-gpu-node/summary.json")).read_text())
    return done, {c["id"]: c for c in summary["checks"]}


def test_only_runs_what_the_check_depends_on_and_reports_the_root_cause(tmp_path: Path) -> None:
    # nouveau holds the GPUs: nvidia-smi cannot read them. Asked for one ECC check, the run must blame nouveau,
    # not the GPU's memory (whose remedy is a drain and an RMA).
    done, checks = validate(tmp_path, "nouveau", "--only", "gpu.ecc_volatile")
    assert done.returncode == 1, done.stderr
    added = "driver.nouveau_absent, driver.nvidia_module, driver.nvidia_smi"
    assert f"--only adds {added}: the selected checks depend on them" in unwrapped(done.stderr)
    assert list(checks) == [*added.split(", "), "gpu.ecc_volatile"]
    nouveau = checks["driver.nouveau_absent"]
    assert (nouveau["status"], nouveau["message"]) == (
        "failed",
        "nouveau is loaded: it holds the GPUs the nvidia driver needs",
    )
    assert nouveau["remedy"].startswith("Blacklist nouveau")
    ecc = checks["gpu.ecc_volatile"]
    assert (ecc["status"], ecc["message"]) == (
        "skipped",
        "depends on driver.nouveau_absent (nouveau is loaded)",
    )
    assert not [c for c in checks.values() if "RMA" in c["remedy"]]


def test_only_takes_a_family(tmp_path: Path) -> None:
    done, checks = validate(tmp_path, "v100-x4", "--only", "topology")
    assert done.returncode == 0, done.stdout + done.stderr
    family = [d.id for d in CATALOGUE if d.id.startswith("topology.")]
    assert family == ["topology.nvlink", "topology.nvlink_errors", "topology.p2p", "topology.nvlink_domain"]
    needed = ["driver.nouveau_absent", "driver.nvidia_module", "driver.nvidia_smi", "gpu.pci_bus", "gpu.count"]
    assert list(checks) == [*needed, *family]  # catalogue order
    assert checks["topology.nvlink"]["status"] == "passed"
    assert f"--only adds {', '.join(needed)}:" in unwrapped(done.stderr)


def test_skip_takes_a_family_and_a_skipped_dependency_stays_out(tmp_path: Path) -> None:
    done, checks = validate(tmp_path, "v100-x4", "--only", "gpu.count,perf", "--skip", "perf,gpu.pci_bus")
    assert list(checks) == ["driver.nouveau_absent", "driver.nvidia_module", "driver.nvidia_smi", "gpu.count"]
    assert "gpu.pci_bus" not in done.stderr


def test_a_mistyped_id_or_command_names_the_closest(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path)
    for flag, typed, meant in (
        ("--only", "gpu.ecc_volatil", "gpu.ecc_volatile"),
        ("--skip", "perf.h2d", "perf.h2d_bandwidth"),
        ("--only", "gpus", "gpu"),
    ):
        done = gpuready("validate", "gpu-node", "-i", str(inv), flag, typed)
        assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
        assert done.stderr.startswith(f"gpuready: error: {flag}: unknown check id(s) {typed}; did you mean {meant}?")
    done = gpuready("validate", "gpu-nod", "-i", str(inv))
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "No such command 'gpu-nod'. Did you mean 'gpu-node'?" in done.stderr
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--onyl", "gpu")
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "Did you mean '--only'?" in done.stderr
