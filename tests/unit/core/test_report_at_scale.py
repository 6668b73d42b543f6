"""report.md of a 1000-host run: a line per check with counts, failing hosts grouped by message, every host's verdict.

The terminal verdict at this scale is tested in test_verdict_text.py."""

from __future__ import annotations

from pathlib import Path

from gpuready.core.report import writers
from gpuready.core.results import Check, RunResult, errored, failed, passed, skipped

CHECKS = [
    "driver.nvidia_smi",
    "driver.version",
    "gpu.count",
    "gpu.ecc_volatile",
    "gpu.pcie_link",
    "gpu.xid",
    "topology.nvlink",
    "node.ib_ports",
]
HOSTS = [f"gn{i:04d}" for i in range(1000)]
OLD_DRIVER = "driver 530.30.02 is installed, the inventory pins 535.54.03"
ECC = "GPU 1 (00000000:1C:00.0): 2 volatile uncorrectable ECC errors (dram_uncorrectable=2)"


def host_checks(i: int, host: str) -> list[Check]:
    if i >= 997:  # three hosts unreachable: one error row each, nothing else
        return [errored("host.reachable", host, f"cannot reach {host}: Connection timed out")]
    rows = []
    for id in CHECKS:
        if id == "driver.version" and i % 100 == 7:
            rows.append(failed(id, host, OLD_DRIVER, remedy="Provision the pinned driver."))
        elif id == "gpu.ecc_volatile" and i in (13, 512):
            rows.append(failed(id, host, ECC, remedy="Drain, reset, field diagnostics."))
        elif id == "topology.nvlink" and i % 250 == 3:
            rows.append(failed(id, host, f"GPU {i % 8}: 17/18 links up (down: 3)"))
        elif id == "node.ib_ports":
            rows.append(skipped(id, host, "the node class has no fabric ports"))
        else:
            rows.append(passed(id, host, "ok"))
    return rows


def big_run() -> RunResult:
    run = RunResult(command="validate gpu-node", inventory="inventories/site")
    for i, host in enumerate(HOSTS):
        run.add(*host_checks(i, host))
    return run


def test_report_md_has_the_same_shape(tmp_path: Path) -> None:
    run = big_run()
    writers.write_all(run, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert len(report.splitlines()) < 120
    assert "| driver.version | 987 | 10 | 0 | 0 | 0 | 10: gn0007, gn0107, gn0207 +7 more — " + OLD_DRIVER in report
    assert "### gpu.ecc_volatile — failed on 2 host(s)" in report and "- hosts: gn0013, gn0512" in report
    summary, hosts = report.split("\n## Hosts\n")
    assert "gn0500" not in summary  # the summary and the failures name only failing hosts
    # Every host's verdict, healthy ones included, with hosts of identical verdicts on one row.
    [healthy] = [line for line in hosts.splitlines() if line.startswith("| passed |")]
    assert "gn0500" in healthy and "| 981 |" in healthy and healthy.endswith("| node.ib_ports |  |")
    assert "| failed | gn0013, gn0512 | 2 | gpu.ecc_volatile |  | node.ib_ports |" in hosts
    assert "| the node class has no fabric ports | node.ib_ports | 997 | gn0000, gn0001," in hosts
    writers.write_all(run, tmp_path, every_row=True)
    assert "| gn0500 | gpu.count | passed | ok |" in (tmp_path / "report.md").read_text()
