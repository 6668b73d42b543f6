"""Provisioning from places without a UTF-8 locale (cron, a Slurm prolog, ``LC_ALL=C`` in a script, a locale
named but not installed): ansible-core refuses every encoding but UTF-8, so gpuready gives its Ansible run one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import gpuready

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "locale_env",
    [{"LC_ALL": "C"}, {"LC_ALL": "POSIX"}, {"LANG": "xx_XX.ISO-8859-1", "LC_ALL": ""}],
    ids=["C", "POSIX", "not-installed"],
)
def test_provision_check_runs_its_playbook_under_a_locale_that_is_not_utf8(
    locale_env: dict[str, str], tmp_path: Path
) -> None:
    env = {"PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "LC_CTYPE": "", **locale_env}
    done = gpuready("provision", "cluster", "-i", "inventories/local", "--check", "--artifacts", str(tmp_path), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "locale encoding" not in done.stdout + done.stderr
    (summary,) = tmp_path.glob("*/summary.json")
    checks = json.loads(summary.read_text())["checks"]
    assert checks and all(c["status"] in ("passed", "skipped") for c in checks), checks
