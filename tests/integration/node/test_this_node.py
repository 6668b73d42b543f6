"""validate this-node: the catalogue on the node it runs on (no inventory, no SSH), against replayed GPU profiles.

The replayed tools (gpuready.lab.replay: real nvidia-smi recordings, each fault one named field edit) come first
on PATH, as the nodes lab puts them on its hosts' PATH. This machine has no /dev/nvidia*, so node.devices fails
here; each test judges the checks its point is about.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.lab import replay
from gpuready.validate.node import local, node_verdict
from gpuready.validate.node.checks import CHECK_IDS
from gpuready.validate.node.checks.selection import ACTIVE
from tests.conftest import gpuready


def replayed(tmp_path: Path, profile: str) -> dict[str, str]:
    """The environment of a node whose GPUs are ``profile``'s recordings."""
    bin_dir = replay.build(profile, tmp_path / profile)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURMD_NODENAME": ""}


def settings_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpuready.yml"
    path.write_text(yaml.safe_dump({"gpuready": replay.lab_settings()}))
    return path


def this_node(tmp_path: Path, profile: str, *args: str) -> tuple[Any, dict[str, Any]]:
    verdict = tmp_path / f"{profile}.json"
    done = gpuready("validate", "this-node", "--verdict", str(verdict), *args, env=replayed(tmp_path, profile))
    assert "Traceback" not in done.stdout + done.stderr
    return done, json.loads(verdict.read_text()) if verdict.exists() else {}


def test_a_fault_fails_with_its_check_id_message_and_remedy_in_the_verdict(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    done, verdict = this_node(
        tmp_path, "ecc-errors", "--settings", str(settings), "--node-class", "c4140-v100", "--node-name", "gn07"
    )
    assert done.returncode == 1, done.stderr
    assert verdict["schema"] == node_verdict.SCHEMA and verdict["host"] == "gn07" and verdict["set"] == "quick"
    checks = {c["id"]: c for c in verdict["checks"]}
    # the quick set only reads: nothing that puts work on the GPUs ran
    assert list(checks) == [i for i in CHECK_IDS if i not in ACTIVE]
    assert checks["gpu.ecc_volatile"]["status"] == "failed" and checks["gpu.xid"]["status"] == "failed"
    assert "GPU 1 (00000000:1C:00.0): 2 volatile uncorrectable ECC errors" in checks["gpu.ecc_volatile"]["message"]
    assert verdict["failure"] == {k: checks["gpu.ecc_volatile"][k] for k in ("id", "message", "remedy")}
    assert verdict["failure"]["remedy"]
    assert verdict["status"] == "failed" and verdict["counts"]["failed"] >= 2
    # the declared class was judged: the replayed model and count match it
    assert checks["gpu.count"]["status"] == checks["gpu.model"]["status"] == "passed"
    assert done.stderr.strip().splitlines()[-1].startswith("gpuready: gn07: failed (")
    assert "gpu.ecc_volatile: GPU 1 (00000000:1C:00.0)" in done.stderr


def test_without_settings_the_declared_class_is_not_judged(tmp_path: Path) -> None:
    done, verdict = this_node(tmp_path, "missing-gpu", "--node-name", "gn08")
    checks = {c["id"]: c for c in verdict["checks"]}
    for declared in local.DECLARED:
        assert checks[declared] == {
            "id": declared,
            "host": "gn08",
            "status": "skipped",
            "message": local.NOT_DECLARED,
            "evidence": "",
            "remedy": "",
        }
    # what needs no declaration still finds the fault: a GPU on the bus that nvidia-smi does not list
    assert checks["gpu.pci_bus"]["status"] == "failed", checks["gpu.pci_bus"]
    assert verdict["failure"]["id"] == "gpu.pci_bus" and done.returncode == 1


def test_a_healthy_profile_passes_every_gpu_and_driver_check(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    _, verdict = this_node(tmp_path, "v100-x4", "--settings", str(settings), "--node-class", "c4140-v100")
    gpu_checks = [c for c in verdict["checks"] if c["id"].split(".")[0] in ("driver", "gpu", "topology")]
    assert gpu_checks and all(c["status"] in ("passed", "skipped") for c in gpu_checks), gpu_checks
    assert [c["id"] for c in gpu_checks if c["status"] == "skipped"] == [
        "gpu.mig",
        "gpu.recovery_action",
        "topology.nvlink_domain",
    ]


def test_run_folder_and_metrics_carry_the_same_state(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    runs, metrics = tmp_path / "runs", tmp_path / "node.prom"
    done, verdict = this_node(
        tmp_path,
        "throttle",
        "--settings",
        str(settings),
        "--node-class",
        "r750xa-a100",
        "--artifacts",
        str(runs),
        "--metrics",
        str(metrics),
    )
    assert done.returncode == 1, done.stderr
    (folder,) = runs.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["command"] == "validate this-node"
    assert json.loads((folder / "node-verdict.json").read_text())["failure"] == verdict["failure"]
    failure = verdict["failure"]
    assert failure["id"] == "gpu.throttle"
    in_summary = next(c for c in summary["checks"] if c["id"] == failure["id"])
    assert (in_summary["message"], in_summary["remedy"]) == (failure["message"], failure["remedy"])
    text = metrics.read_text()
    assert f'check="{failure["id"]}"' in text and "gpuready_check_failure_info{" in text
    assert failure["message"].replace('"', '\\"') in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--settings", "/nonexistent/gpuready.yml"], "/nonexistent/gpuready.yml: no such settings file"),
        (["--node-class", "c4140-v100"], "--node-class c4140-v100: a node class is defined in a settings file"),
        (["--settings", "SETTINGS", "--node-class", "nosuch"], "--node-class nosuch: not a node class of"),
        (["--set", "slow"], "'slow' is not one of 'quick', 'full'"),
        (["--budget", "0"], "0"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    args = [str(settings_file(tmp_path)) if a == "SETTINGS" else a for a in args]
    done, verdict = this_node(tmp_path, "v100-x4", *args)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    assert verdict == {}


def test_a_node_that_outlasts_the_budget_is_an_error_never_a_failure(tmp_path: Path) -> None:
    env = replayed(tmp_path, "v100-x4")
    # nvidia-smi that hangs, as one does on a GPU fallen off the bus (Xid 79)
    hang = tmp_path / "hang"
    hang.mkdir()
    (hang / "nvidia-smi").write_text("#!/bin/sh\nsleep 60\n")
    (hang / "nvidia-smi").chmod(0o755)
    env["PATH"] = f"{hang}:{env['PATH']}"
    verdict_path = tmp_path / "v.json"
    done = gpuready("validate", "this-node", "--budget", "2", "--verdict", str(verdict_path), env=env, timeout=60)
    assert done.returncode == 3, done.stderr
    verdict = json.loads(verdict_path.read_text())
    assert verdict["status"] == "error" and verdict["failure"] is None
    assert "ran past 2s" in verdict["checks"][0]["message"]


def test_a_verdict_of_another_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    from gpuready.core.errors import BadInput

    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "gpuready.node-verdict/v0", "gpuready": "0.0.9", "checks": []}))
    with pytest.raises(BadInput, match=r"schema 'gpuready.node-verdict/v0' \(written by gpuready 0.0.9\); this"):
        node_verdict.read(old)
    other = tmp_path / "summary.json"
    other.write_text(json.dumps({"command": "validate gpu-node", "checks": []}))
    with pytest.raises(BadInput, match="not a gpuready node verdict"):
        node_verdict.read(other)


def test_the_docs_sample_is_what_a_faulty_node_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import ROOT
    from tests.doc_samples import owned_block

    if list(Path("/dev").glob("nvidia[0-9]*")):
        pytest.skip("this machine has GPU device files: node.devices passes and the sample's counts differ")
    monkeypatch.setenv("PATH", replayed(tmp_path, "ecc-errors")["PATH"])
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    settings_file(tmp_path)
    sample = owned_block(ROOT / "docs" / "fleet.md")
    done = sample.run(tmp_path)
    assert [d.returncode for d in done] == [1, 1], [d.stdout for d in done]
    assert json.loads((tmp_path / "gn07.json").read_text())["failure"]["id"] == "gpu.ecc_volatile"
    sample.assert_printed(done)
