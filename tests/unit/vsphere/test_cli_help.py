"""`--help` of the vSphere commands must not import pyvmomi (it is slow, and not needed to list options)."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from click.testing import CliRunner
from gpuready.core.cli import cli
for args in (["--help"], ["validate", "vsphere", "--help"], ["provision", "cluster", "--help"]):
    assert CliRunner().invoke(cli, args).exit_code == 0, args
print(sorted(m for m in sys.modules if m.startswith(("pyVmomi", "pyVim"))))
"""


def test_help_imports_no_pyvmomi() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_validate_vsphere_and_provision_options_are_listed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuready.core.cli", "provision", "cluster", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "--allow-power-off" in done.stdout and "--insecure" in done.stdout
