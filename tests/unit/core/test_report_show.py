"""A finished run's verdict again (`report show`), JSON for scripts (`--output json`), and report.html's escaping."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpuready.core import redact
from gpuready.core.report import html, writers
from gpuready.core.results import RunResult, failed, passed, skipped
from tests.browser import Dom
from tests.conftest import ROOT, gpuready

ROOT_LOCAL = ROOT / "inventories" / "local"


def test_output_json_puts_only_json_on_stdout(artifacts: Path) -> None:
    done = gpuready("validate", "gpu-node", "--artifacts", str(artifacts), "--output", "json")
    assert done.returncode in (0, 1), done.stderr
    printed = json.loads(done.stdout)
    (folder,) = artifacts.iterdir()
    assert printed["artifacts"] == str(folder)
    assert printed["checks"] == json.loads((folder / "summary.json").read_text())["checks"]
    assert printed["status"] == ("passed" if done.returncode == 0 else "failed")
    assert printed["status"].upper() in done.stderr  # the verdict for a person is on stderr
    assert (folder / "report.html").is_file()


def _run(folder: Path, *checks: object) -> Path:
    run = RunResult(command="validate gpu-node", inventory="inventories/site")
    run.add(*checks)  # type: ignore[arg-type]
    folder.mkdir(parents=True)
    writers.write_all(run, folder)
    return folder


def test_report_show_prints_the_latest_run_or_the_one_named(artifacts: Path) -> None:
    _run(artifacts / "0001-20261127T100000Z-validate-gpu-node", passed("gpu.count", "gn01", "8 GPUs"))
    _run(
        artifacts / "0002-20261127T110000Z-validate-gpu-node",
        failed("gpu.throttle", "gn02", "hw_thermal_slowdown", remedy="Check cooling"),
    )
    latest = gpuready("report", "show", "--artifacts", str(artifacts))
    assert latest.returncode == 1 and "gpu.throttle" in latest.stdout and "FAILED" in latest.stdout
    first = gpuready("report", "show", "1", "--artifacts", str(artifacts))
    assert first.returncode == 0 and "PASSED" in first.stdout and "gpu.throttle" not in first.stdout
    as_json = gpuready("report", "show", str(artifacts / "0002-20261127T110000Z-validate-gpu-node"), "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["checks"][0]["remedy"] == "Check cooling"


def test_report_show_refuses_in_one_line(artifacts: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json")
    for args in (["--artifacts", str(artifacts)], ["9", "--artifacts", str(artifacts)], [str(broken)]):
        done = gpuready("report", "show", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("gpuready: error: ") and len(done.stderr.strip().splitlines()) == 1


def test_html_escapes_what_hosts_print_and_masks_secrets(tmp_path: Path) -> None:
    secret = "s3cr3t-vcenter-pw"
    redact.register(secret)
    hostile = f'<script>alert(1)</script><img src="http://example.com/x.png"> \x1b[31m {secret}'
    folder = _run(
        tmp_path / "run",
        failed("gpu.xid", "gn<b>01</b>", hostile, evidence=hostile, remedy=f"echo '{secret}' && rm -rf /"),
        skipped("diag.dcgm", "gn02", "DCGM not installed"),
    )
    text = (folder / "report.html").read_text()
    page = Dom()
    page.feed(text)
    assert secret not in text and redact.MASK in text
    assert len(page.root.find_all("script")) == 1 and not page.root.find_all("b")  # only the page's own script
    assert not [u for u in page.urls if not u.startswith(("#", "data:"))]
    assert "\x1b" not in text and "\\x1b[31m" in text
    md = (folder / "report.md").read_text()
    assert secret not in md
    # Not a gpuready command: prose (escaped for Markdown), never a code block a user would paste into a shell.
    assert "- remedy: echo '********' &amp;&amp; rm -rf /" in md and "```sh" not in md
    assert re.search(r"\| DCGM not installed \| diag\.dcgm \| 1 \| gn02 \|", md)


def test_a_plot_in_the_run_folder_is_inline(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = tmp_path / "run"
    folder.mkdir()
    plt.plot([1, 2, 4], [100, 190, 370])
    plt.savefig(folder / "scaling.png")
    plt.close()
    page = html.render(RunResult(command="validate training"), folder)
    assert '<img src="data:image/png;base64,' in page and "scaling.png" in page


def test_run_numbers_go_on_past_9999(artifacts: Path) -> None:
    """Four digits are the least a run number has, not the most: run 10000 is the latest, found by its number,
    and the next run is 10001."""
    _run(artifacts / "9999-20261127T100000Z-validate-gpu-node", passed("gpu.count", "gn01", "8 GPUs"))
    _run(
        artifacts / "10000-20261127T110000Z-validate-gpu-node",
        failed("gpu.throttle", "gn02", "hw_thermal_slowdown", remedy="Check cooling"),
    )
    latest = gpuready("report", "show", "--artifacts", str(artifacts))
    assert latest.returncode == 1 and "gpu.throttle" in latest.stdout, latest.stdout + latest.stderr
    named = gpuready("report", "show", "10000", "--artifacts", str(artifacts))
    assert named.returncode == 1 and "gpu.throttle" in named.stdout, named.stdout + named.stderr
    done = gpuready("inventory", "check", "-i", str(ROOT_LOCAL), "--artifacts", str(artifacts))
    assert done.returncode == 0, done.stderr
    assert [p.name.split("-")[0] for p in artifacts.iterdir() if p.name.endswith("inventory-check")] == ["10001"]


def test_a_quoted_tilde_in_gpuready_artifacts_is_the_home_folder(tmp_path: Path) -> None:
    """GPUREADY_ARTIFACTS='~/runs' (quoted: no shell expanded it) is ~/runs, not a folder named '~'."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    inv = ROOT_LOCAL
    done = gpuready(
        "inventory", "check", "-i", str(inv), cwd=cwd, env={"HOME": str(home), "GPUREADY_ARTIFACTS": "~/runs"}
    )
    assert done.returncode == 0, done.stderr
    assert not (cwd / "~").exists()
    [run] = (home / "runs").iterdir()
    assert run.name.endswith("-inventory-check")
    shown = gpuready("report", "show", cwd=cwd, env={"HOME": str(home), "GPUREADY_ARTIFACTS": "~/runs"})
    assert shown.returncode == 0, shown.stderr


def test_summary_json_says_which_gpuready_wrote_it(artifacts: Path) -> None:
    done = gpuready("inventory", "check", "-i", "inventories/local", "--artifacts", str(artifacts))
    assert done.returncode == 0, done.stderr
    version = gpuready("--version").stdout.split()[-1]
    (folder,) = artifacts.iterdir()
    assert json.loads((folder / "summary.json").read_text())["gpuready_version"] == version


def test_every_option_of_validate_training_says_what_it_does() -> None:
    import click

    from gpuready.validate.training import training

    undocumented = [p.name for p in training.params if isinstance(p, click.Option) and not p.help]
    assert undocumented == [], undocumented
    assert "densenet121 (CheXNet) or resnet50" in " ".join(gpuready("validate", "training", "--help").stdout.split())


def test_report_md_writes_metrics_as_summary_json_does_not_as_python_prints_them(tmp_path: Path) -> None:
    run = RunResult(command="provision cluster", inventory="inventories/local")
    run.add(passed("preflight.os", "localhost", "Debian 12 is supported"))
    run.metrics = {
        "check_mode": True,
        "changed": 0,
        "driver": None,
        "flavour": "kubernetes",
        "node_marks": {"check_mode": True, "changed": 0},
        "figures": [{"name": "h2d", "value": 1.0}],
    }
    folder = tmp_path / "run"
    folder.mkdir()
    writers.write_all(run, folder)
    md = (folder / "report.md").read_text()
    metrics = md.split("\n## Metrics\n")[1]
    assert "- check_mode: true\n- changed: 0\n- driver: null\n- flavour: kubernetes" in metrics
    assert "- node_marks: check_mode: true, changed: 0" in metrics
    assert "True" not in metrics and "{'" not in metrics and "figures" not in metrics
    shown = gpuready("report", "show", str(folder))
    assert shown.returncode == 0 and "check mode" in shown.stdout
