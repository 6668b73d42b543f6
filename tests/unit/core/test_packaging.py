"""The package layout promises: every package is installed, no root `gpuready/`, a light CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

HEAVY = ["tensorflow", "horovod", "kubernetes", "pyvmomi", "ansible", "openshift", "testinfra", "matplotlib"]


def _declared() -> tuple[list[str], dict[str, str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = data["tool"]["setuptools"]
    return setuptools["packages"], setuptools["package-dir"]


def test_every_folder_with_init_is_a_listed_package() -> None:
    packages, mapping = _declared()
    expected = set()
    for name, folder in mapping.items():
        base = ROOT / folder
        # A folder mapped to a package of its own (lab/ is gpuready.lab) is not a sub-package here.
        nested = [ROOT / f for n, f in mapping.items() if n != name and (ROOT / f).is_relative_to(base)]
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts or any(init.is_relative_to(n) for n in nested):
                continue
            relative = init.parent.relative_to(base)
            expected.add(".".join([name, *relative.parts]))
    missing = sorted(expected - set(packages))
    assert not missing, f"folders with __init__.py missing from [tool.setuptools] packages: {missing}"


def test_listed_packages_exist() -> None:
    packages, mapping = _declared()
    for package in packages:
        top = next(n for n in mapping if package == n or package.startswith(n + "."))
        folder = ROOT / mapping[top] / package[len(top) :].lstrip(".").replace(".", "/")
        assert (folder / "__init__.py").is_file(), package


def test_no_physical_gpuready_folder_at_root() -> None:
    assert not (ROOT / "gpuready").exists()


HELP_ARGV = [
    ["--help"],
    ["--version"],
    ["provision", "--help"],
    ["provision", "cluster", "--help"],
    ["inventory", "--help"],
    ["lab", "--help"],
    ["validate", "--help"],
    ["report", "--help"],
]


@pytest.mark.parametrize("argv", HELP_ARGV)
def test_help_does_not_import_heavy_libraries(argv: list[str]) -> None:
    code = (
        "import sys, json\n"
        f"sys.argv = ['gpuready', *{argv!r}]\n"
        "from gpuready.core.cli import cli\n"
        "try:\n    cli(prog_name='gpuready')\nexcept SystemExit as e:\n    code = e.code\n"
        f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    last = done.stderr.strip().splitlines()[-1]
    code, imported = json.loads(last)
    if code == 2 and "No such command" in done.stderr:
        pytest.skip(f"{argv[0]} is not a command in this build")
    assert code == 0, done.stderr
    assert imported == [], f"`gpuready {' '.join(argv)}` imported {imported}"


def test_outside_a_checkout_the_default_inventory_is_the_shipped_copy_of_inventories_local(tmp_path: Path) -> None:
    from tests.conftest import gpuready

    done = gpuready(
        "inventory", "check", "--artifacts", str(tmp_path / "runs"), cwd=tmp_path, env={"GPUREADY_INVENTORY": ""}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [summary] = (tmp_path / "runs").glob("*/summary.json")
    used = Path(json.loads(summary.read_text())["inventory"])
    assert used.parts[-2:] == ("inventories", "local") and used.is_absolute()
    assert (used / "hosts.yml").read_text() == (ROOT / "inventories" / "local" / "hosts.yml").read_text()


def test_building_the_package_prints_no_setuptools_warning_per_data_folder(tmp_path: Path) -> None:
    """`make demo` installs gpuready with pip: its build must not bury the first gpuready line under a
    "Package would be ignored" warning per roles/*/tasks folder, and the wheel still carries that data."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    log = built.stdout + built.stderr
    assert "Package would be ignored" not in log and "absent from the `packages` configuration" not in log
    (wheel,) = tmp_path.glob("gpuready-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in (
        "gpuready/playbooks/roles/nvidia_driver/tasks/main.yml",
        "gpuready/inventories/local/hosts.yml",
        "gpuready/lab/gomod/govmomi/vcsim/main.go",
        "gpuready/core/platforms/kube_rbac.yaml",
    ):
        assert shipped in names, shipped
