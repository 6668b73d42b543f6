"""docs/vsphere.md's console samples are what the commands print on the vSphere lab: scripts/record-doc-samples
brings the lab up in an empty folder (`gpuready lab up --components vsphere`), re-runs every sample in order on
it, takes it down, and fails with a diff when one no longer matches. Stopped half-way (a test's timeout sends
SIGTERM), it still takes its lab down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.processes import leftovers, marked, new_mark
from tests.unit.core.test_doc_samples import SCRIPT, check

pytestmark = pytest.mark.slow


def test_the_vsphere_samples_still_match_what_the_lab_prints() -> None:
    done = check(ROOT / "docs" / "vsphere.md", lab="vsphere")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lab: vsphere" in (ROOT / "docs" / "vsphere.md").read_text()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_recorder_stopped_while_a_sample_runs_takes_its_lab_down(
    vcsim_binary: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    # vcsim_binary: built (or found in the cache) before the wait below starts
    env = new_mark()  # every process the recorder starts carries it: the lab's vcsim too
    folder = tmp_path / "folder"
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- recorded: run by scripts/record-doc-samples; lab: vsphere -->\n```console\n"
        f"$ pwd > {folder} && sleep 600\n```\n<!-- /recorded -->\n"
    )
    recorder = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--check", str(page)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 300
        while not (folder.exists() and folder.read_text().strip()):
            assert recorder.poll() is None and time.monotonic() < deadline, recorder.communicate()[0]
            time.sleep(0.2)
        running = marked(env)
        assert any("vcsim" in p for p in running) and any("sleep 600" in p for p in running), running
        recorder.send_signal(sig)
        printed, _ = recorder.communicate(timeout=120)
        left = leftovers(env, settle=5)
    finally:
        if recorder.poll() is None:
            recorder.kill()
        for line in leftovers(env, settle=0):  # a failing run must not leak a vcsim
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
    assert left == [], f"the lab or the sample's command left running: {printed}"
    assert recorder.returncode == 128 + sig, printed
    assert f"record-doc-samples: stopped by {sig.name}; taking its labs down" in printed
    assert not Path(folder.read_text().strip()).exists()  # the sample's folder is gone with its lab
