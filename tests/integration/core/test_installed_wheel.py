"""gpuready as a user gets it: a wheel built from the tracked files, installed with the `lab` extra into a
fresh virtual environment, run from a folder outside the repository with the repository on no path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, require

# Building and installing gpuready with all its dependencies takes minutes on a small machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def _copy_tracked_files(target: Path) -> None:
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if "__pycache__" not in p.parts}


class Installed:
    def __init__(self, venv: Path, home: Path) -> None:
        self.venv = venv
        self.home = home
        self.site = next(venv.glob("lib/python*/site-packages"))

    def env(self, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "XDG_CACHE_HOME", "TERM", "CI")}
        # Go builds are cached under the user's cache dir; share it so the lab does not rebuild vcsim.
        keep.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))
        return {
            **keep,
            "HOME": str(self.home),
            "PATH": f"{self.venv / 'bin'}:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            **extra,
        }

    def gpuready(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "gpuready"), *args],
            cwd=self.home,
            env=self.env(**(env or {})),
            capture_output=True,
            text=True,
            timeout=900,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("wheel")
    source, dist = work / "source", work / "dist"
    _copy_tracked_files(source)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=work,
    )
    require(
        built.returncode == 0 or "Could not find a version" not in built.stderr,
        "pip cannot reach an index for the build backend (setuptools)",
    )
    assert built.returncode == 0, built.stderr
    shutil.rmtree(source)  # nothing can come from the sources now but the wheel
    [wheel] = dist.glob("gpuready-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-compile", f"{wheel}[lab]"],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=work,
    )
    assert done.returncode == 0, done.stderr
    home = work / "home"
    home.mkdir()
    yield Installed(venv, home)


def test_the_installed_package_comes_from_the_wheel_not_the_repository(installed: Installed) -> None:
    code = (
        "import sys, json\nfrom importlib.resources import files\n"
        "import gpuready.core.runner as r\n"
        "print(json.dumps([str(r.collection_dir()), sys.path]))"
    )
    done = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", code],
        cwd=installed.home,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    collection, path = json.loads(done.stdout)
    assert Path(collection) == installed.site / "gpuready" / "playbooks"
    assert (Path(collection) / "galaxy.yml").is_file()
    assert (Path(collection) / "plugins" / "modules" / "vsphere_plan.py").is_file()
    assert not any(str(ROOT) in p for p in path)


def test_inventory_check_and_provision_check_mode_on_this_machine(installed: Installed) -> None:
    inventory = installed.home / "inventories" / "local"
    shutil.copytree(ROOT / "inventories" / "local", inventory)
    done = installed.gpuready("inventory", "check", "-i", str(inventory))
    assert done.returncode == 0, done.stdout + done.stderr
    before = _files_under(installed.site)
    runs = installed.home / "runs"
    done = installed.gpuready("provision", "cluster", "-i", str(inventory), "--check", "--artifacts", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    [summary] = runs.glob("*/summary.json")
    checks = {c["id"]: c["status"] for c in json.loads(summary.read_text())["checks"]}
    assert checks["preflight.os"] == "passed" and checks["provision.apply"] == "passed"
    assert _files_under(installed.site) == before, "a run wrote into site-packages"


def test_lab_vsphere_provisioned_and_validated_then_lab_nodes_validated(installed: Installed) -> None:
    lab = installed.home / "lab"
    before = _files_under(installed.site)
    up = installed.gpuready("lab", "up", "--components", "vsphere", "--lab-dir", str(lab))
    try:
        assert up.returncode == 0, up.stderr
        inventory = up.stdout.strip().splitlines()[-1]
        assert 'export GPUREADY_VCENTER_PASSWORD="$(cat ' in up.stderr
        hosts = (Path(inventory) / "hosts.yml").read_text()
        assert "ansible_python_interpreter: '{{ ansible_playbook_python }}'" in hosts
        password = {"GPUREADY_VCENTER_PASSWORD": (lab / "vsphere" / "password").read_text()}
        runs = installed.home / "runs-vsphere"
        done = installed.gpuready(
            "provision", "cluster", "-i", inventory, "--allow-power-off", "--artifacts", str(runs), env=password
        )
        assert done.returncode == 0, done.stdout + done.stderr
        done = installed.gpuready("validate", "vsphere", "-i", inventory, "--artifacts", str(runs), env=password)
        assert done.returncode == 0, done.stdout + done.stderr
        [summary] = runs.glob("*validate-vsphere/summary.json")
        checks = {c["id"]: c["status"] for c in json.loads(summary.read_text())["checks"]}
        assert checks["vsphere.ats"] == "passed" and "vsphere.vm.nvlink_pair" in checks
        assert set(checks.values()) <= {"passed", "skipped"}
    finally:
        down = installed.gpuready("lab", "down", "--lab-dir", str(lab))
    assert down.returncode == 0, down.stderr
    # The lab's Go builds live in <cache>/gpuready/<module>-<version>-<digest>/bin, complete when marked so.
    cache = Path(installed.env()["XDG_CACHE_HOME"]) / "gpuready"
    built = [b for b in cache.glob("govmomi-v*/bin/vcsim") if (b.parent.parent / ".complete").is_file()]
    assert built, f"vcsim was not built into the user's cache dir {cache}"

    require(os.geteuid() == 0 and shutil.which("ip"), "the nodes lab needs root and `ip netns`")
    prefix = f"gw{os.getpid() % 100000}"
    up = installed.gpuready(
        "lab",
        "up",
        "--components",
        "nodes",
        "--set",
        "nodes.profiles=v100-x4,a100-x4",
        "--set",
        f"nodes.prefix={prefix}",
        "--lab-dir",
        str(lab),
    )
    try:
        assert up.returncode == 0, up.stderr
        inventory = up.stdout.strip().splitlines()[-1]
        assert f"gpuready validate gpu-node -i {inventory}" in up.stderr
        done = installed.gpuready(
            "validate", "gpu-node", "-i", inventory, "--artifacts", str(installed.home / "runs-nodes")
        )
        assert done.returncode == 0, done.stdout + done.stderr
        [summary] = (installed.home / "runs-nodes").glob("*/summary.json")
        checks = json.loads(summary.read_text())["checks"]
        assert {c["host"] for c in checks} >= {"v100-x4-00", "a100-x4-01"}
        assert all(c["status"] in ("passed", "skipped") for c in checks), checks
    finally:
        down = installed.gpuready("lab", "down", "--lab-dir", str(lab))
    assert down.returncode == 0, down.stderr
    assert _files_under(installed.site) == before, "the lab wrote into site-packages"
