"""The one results model and its writers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from gpuready.core import redact
from gpuready.core.report import writers
from gpuready.core.results import Check, RunResult, errored, failed, passed, skipped


def _run(*checks: Check) -> RunResult:
    run = RunResult(command="validate gpu-node", inventory="inv")
    run.add(*checks)
    return run


@pytest.mark.parametrize(
    ("checks", "status", "code"),
    [
        ([], "passed", 0),
        ([passed("a", "h"), skipped("b", "h", "n/a")], "passed", 0),
        ([passed("a", "h"), failed("b", "h", "bad")], "failed", 1),
        ([errored("a", "h", "unreachable")], "error", 3),
        ([errored("a", "h1", "unreachable"), failed("b", "h2", "bad")], "error", 1),
    ],
)
def test_status_and_exit_code_follow_the_checks(checks: list[Check], status: str, code: int) -> None:
    run = _run(*checks)
    assert run.status == status
    assert run.exit_code() == code


def test_aborted_run_is_an_error_even_without_checks() -> None:
    run = _run(passed("a", "h"))
    run.aborted = "cancelled"
    assert (run.status, run.exit_code()) == ("error", 3)


def test_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError, match="status"):
        Check("x", "h", "fine")


def test_writers_produce_summary_junit_report_and_failure_marker(tmp_path: Path) -> None:
    run = _run(
        passed("driver.version", "gpu01", "550.54.15"),
        failed("gpu.count", "gpu01", "3 GPUs, expected 4", evidence="nvidia-smi -L", remedy="reseat"),
        skipped("nvlink.links", "gpu02", "PCIe model"),
        errored("reach", "gpu03", "unreachable"),
    )
    run.metrics = {"images_per_second": 12.5}
    writers.write_all(run, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "error"
    assert summary["counts"] == {"passed": 1, "failed": 1, "skipped": 1, "error": 1, "pending": 0}
    assert summary["checks"][1] == {
        "id": "gpu.count",
        "host": "gpu01",
        "status": "failed",
        "message": "3 GPUs, expected 4",
        "evidence": "nvidia-smi -L",
        "remedy": "reseat",
    }
    assert summary["metrics"] == {"images_per_second": 12.5}
    assert RunResult.from_dict(summary).to_dict()["checks"] == summary["checks"]
    xml = JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    cases = {case.name: case for suite in xml for case in suite}
    assert cases["driver.version"].is_passed
    assert isinstance(cases["gpu.count"].result[0], Failure)
    assert isinstance(cases["nvlink.links"].result[0], Skipped)
    assert isinstance(cases["reach"].result[0], Error)
    assert "gpu.count" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "FAILURE").is_file()


def test_a_passing_run_leaves_no_failure_marker(tmp_path: Path) -> None:
    (tmp_path / "FAILURE").write_text("old")
    writers.write_all(_run(passed("a", "h")), tmp_path)
    assert not (tmp_path / "FAILURE").exists()


def test_registered_secrets_never_reach_the_files(tmp_path: Path) -> None:
    secret = "s3cr3t-Passw0rd"
    redact.register(secret)
    run = _run(failed("login", "vc", f"login as admin with {secret} refused", evidence=f"pw={secret}"))
    run.metrics = {"vcenter_password": "other-secret", "note": f"used {secret}"}
    writers.write_all(run, tmp_path)
    for name in ("summary.json", "junit.xml", "report.md"):
        text = (tmp_path / name).read_text()
        assert secret not in text, name
        assert "other-secret" not in text, name
    assert redact.MASK in (tmp_path / "summary.json").read_text()
