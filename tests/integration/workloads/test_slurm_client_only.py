"""A machine with Slurm's client (sbatch) but no cluster: the size is skipped with the script to submit by hand,
not a failed check. Runs the real sbatch of scripts/install-system-deps' slurm-client."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready, require


def test_sbatch_without_a_configured_cluster_skips_with_the_script(
    artifacts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(shutil.which("sbatch"), "sbatch (Debian: slurm-client; scripts/install-system-deps)")
    require(not Path("/etc/slurm/slurm.conf").exists(), "a machine without a Slurm cluster (/etc/slurm/slurm.conf)")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.delenv("SLURM_CONF_SERVER", raising=False)
    done = gpuready(
        "validate",
        "training",
        "-i",
        str(ROOT / "inventories/baremetal-c4140"),
        "--gpus",
        "8",
        "--artifacts",
        str(artifacts),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = list(artifacts.iterdir())
    (check,) = json.loads((run / "summary.json").read_text())["checks"]
    assert check["status"] == "skipped", check
    assert check["message"].startswith("train-8w.sbatch written, not submitted (sbatch is here but no Slurm cluster")
    assert "#SBATCH --nodes=2" in (run / "train-8w.sbatch").read_text()
