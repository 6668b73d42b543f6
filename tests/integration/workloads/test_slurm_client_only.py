"""A machine with Slurm's client (sbatch) but no cluster: the size is skipped with the script to submit by hand,
not a failed check. Runs the real sbatch of scripts/install-system-deps' slurm-client."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, require
from tests.doc_samples import owned_block


def test_sbatch_without_a_configured_cluster_skips_with_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(shutil.which("sbatch"), "sbatch (Debian: slurm-client; scripts/install-system-deps)")
    require(not Path("/etc/slurm/slurm.conf").exists(), "a machine without a Slurm cluster (/etc/slurm/slurm.conf)")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.delenv("SLURM_CONF_SERVER", raising=False)
    # The docs' Slurm sample is this run, from an empty folder.
    sample = owned_block(ROOT / "docs" / "training.md")
    assert sample.commands[1] == "gpuready validate training -i inventories/baremetal-c4140 --gpus 8 -v"
    done = sample.run(tmp_path)
    assert [d.returncode for d in done] == [0] * len(done), [d.stdout for d in done]
    (run,) = list((tmp_path / "gpuready-runs").iterdir())
    (check,) = json.loads((run / "summary.json").read_text())["checks"]
    assert check["status"] == "skipped", check
    assert check["message"].startswith("train-8w.sbatch written, not submitted (sbatch is here but no Slurm cluster")
    assert "#SBATCH --nodes=2" in (run / "train-8w.sbatch").read_text()
    sample.assert_printed(done)
