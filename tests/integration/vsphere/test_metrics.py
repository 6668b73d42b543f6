"""`validate vsphere --metrics` against VMware's vcsim: each host's and VM's check results and the counts read back,
in a textfile Prometheus's promtool accepts."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import gpuready
from tests.integration.core.test_metrics_textfile import series
from tests.integration.vsphere.conftest import Vcsim
from tests.promtool import check_metrics


def test_validate_vsphere_writes_its_results_per_host_and_vm(vcsim: Vcsim, env: dict[str, str], tmp_path: Path) -> None:
    runs, folder = tmp_path / "runs", tmp_path / "textfile"
    folder.mkdir()
    args = ("validate", "vsphere", "-i", str(vcsim.inventory()), "--artifacts", str(runs), "--metrics", str(folder))
    done = gpuready(*args, env=env)
    assert done.returncode == 1, done.stderr  # the untouched site: ATS off, no passthrough
    text = (folder / "gpuready_validate_vsphere.prom").read_text()
    checked = check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [path] = runs.glob("*/summary.json")
    summary = json.loads(path.read_text())
    results = {(s["check"], s["host"], s["status"]): v for s, v in series(text, "gpuready_check_results")}
    assert results[("vsphere.ats", "DC0_H0", "failed")] == 1
    assert sum(results.values()) == len(summary["checks"])
    vsphere = summary["metrics"]["vsphere"]
    for name, key in (("hosts", "hosts"), ("vms", "vms"), ("vm_gpus", "gpus")):
        [(labels, value)] = series(text, f"gpuready_vsphere_{name}")
        assert value == vsphere[key] and labels == {"command": "validate vsphere"}
