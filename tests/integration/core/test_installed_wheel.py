"""gpuready as a user gets it: a wheel built from the tracked files, installed with the `lab` extra into a
fresh virtual environment, run from a folder outside the repository with the repository on no path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, ModuleTmp, require

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

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """``code`` run by the installed environment's Python from the user's home, as a user would."""
        return subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", code],
            cwd=self.home,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture(scope="module")
def installed(module_tmp: ModuleTmp) -> Iterator[Installed]:
    work = module_tmp("wheel")
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
    done = installed.python(code)
    assert done.returncode == 0, done.stderr
    collection, path = json.loads(done.stdout)
    assert Path(collection) == installed.site / "gpuready" / "playbooks"
    assert (Path(collection) / "galaxy.yml").is_file()
    assert (Path(collection) / "plugins" / "modules" / "vsphere_plan.py").is_file()
    assert not any(str(ROOT) in p for p in path)


def tour_blocks(readme: str) -> list[list[str]]:
    """The command lines of the README's tour, block by block, exactly as written: a console block's
    ``$ `` lines, every line of a sh block."""
    tour = readme.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    blocks = []
    for kind, body in re.findall(r"```(console|sh)\n(.*?)```", tour, re.DOTALL):
        lines = body.splitlines()
        blocks.append(
            [ln[2:] for ln in lines if ln.startswith("$ ")] if kind == "console" else list(filter(None, lines))
        )
    return blocks


def run_lines(installed: Installed, lines: list[str]) -> list[tuple[str, int]]:
    """The lines in one bash, as typed into one shell (variables carry over); each line's exit status."""
    statuses = installed.home / ".statuses"
    statuses.unlink(missing_ok=True)
    script = "".join(f"{line}\necho $? >> {statuses}\n" for line in lines)
    done = subprocess.run(
        ["bash", "-c", script], cwd=installed.home, env=installed.env(), capture_output=True, text=True, timeout=1800
    )
    codes = [int(c) for c in statuses.read_text().split()] if statuses.exists() else []
    assert len(codes) == len(lines), done.stdout + done.stderr
    return list(zip(lines, codes, strict=True))


def test_the_readme_tour_runs_as_written(installed: Installed) -> None:
    """Steps 1-3 of the tour (4 compiles Kubernetes, 5 needs TensorFlow), in an empty folder, then `lab down`."""
    blocks = tour_blocks((ROOT / "README.md").read_text())
    assert blocks[0][:2] == ["gpuready inventory init", "gpuready inventory check -i inventories/local"]
    lines = [ln for block in blocks for ln in block]
    nodes = next(i for i, ln in enumerate(lines) if "--components nodes" in ln)
    assert any("--components vsphere" in ln for ln in lines[:nodes])
    if os.geteuid() != 0 or not shutil.which("ip"):
        lines = lines[:nodes]  # the nodes lab needs root and `ip netns`
    before = _files_under(installed.site)
    try:
        ran = run_lines(installed, lines)
    finally:
        down = installed.gpuready("lab", "down")
    assert down.returncode == 0, down.stderr
    for line, code in ran:
        # the nodes lab has faulty profiles on purpose: validating it finds them (exit 1)
        expected = 1 if line.startswith("gpuready validate gpu-node") else 0
        assert code == expected, f"{line!r} exited {code}"
    runs = installed.home / "gpuready-runs"
    local = json.loads(min(runs.glob("*provision-cluster/summary.json")).read_text())  # the first: this machine
    checks = {c["id"]: c["status"] for c in local["checks"]}
    assert checks["preflight.os"] == "passed" and checks["provision.apply"] == "passed"
    [validated] = runs.glob("*validate-vsphere/summary.json")
    checks = {c["id"]: c["status"] for c in json.loads(validated.read_text())["checks"]}
    assert checks["vsphere.ats"] == "passed" and "vsphere.vm.nvlink_pair" in checks
    assert set(checks.values()) <= {"passed", "skipped"}
    # The lab's Go builds live in <cache>/gpuready/<module>-<version>-<digest>/bin, complete when marked so.
    cache = Path(installed.env()["XDG_CACHE_HOME"]) / "gpuready"
    built = [b for b in cache.glob("govmomi-v*/bin/vcsim") if (b.parent.parent / ".complete").is_file()]
    assert built, f"vcsim was not built into the user's cache dir {cache}"
    assert _files_under(installed.site) == before, "a run or the lab wrote into site-packages"
    require(len(lines) > nodes, "the nodes lab needs root and `ip netns`")
    [nodes_run] = runs.glob("*validate-gpu-node/summary.json")
    failed = {
        c["host"].rsplit("-", 1)[0] for c in json.loads(nodes_run.read_text())["checks"] if c["status"] == "failed"
    }
    assert failed and not failed & {"v100-x4", "a100-x4", "h100-x8"}, failed  # faulty profiles only


def test_training_without_tensorflow_says_how_to_install_it_and_no_mwms_once_asked(installed: Installed) -> None:
    runs = str(installed.home / "runs-training")
    args = ["validate", "training", "--cpu", "--gpus", "1", "--artifacts", runs]
    done = installed.gpuready(*args, "--distribution", "mwms")
    assert done.returncode == 3, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]  # after the line naming what would have trained
    assert line.startswith(f"gpuready: error: tensorflow not installed in {installed.venv}: "), line
    assert "-m pip install 'tensorflow==2.15.1'" in line and "--distribution mwms" not in line
    done = installed.gpuready(*args)
    assert done.returncode == 3 and "--no-build-isolation 'horovod==0.28.1'" in done.stderr
    assert done.stderr.strip().endswith("or use --distribution mwms (TensorFlow alone)")
    # The page it cites is the wheel's own copy, with the section it names.
    page = installed.site / "gpuready" / "docs" / "training.md"
    assert f'(see {page}, "Installing TensorFlow and Horovod")' in done.stderr
    assert "## Installing TensorFlow and Horovod" in page.read_text()


def test_every_page_a_message_cites_ships_in_the_wheel(installed: Installed) -> None:
    """The wheel has no docs/ beside it: the pages messages cite (scanned from the sources, as
    tests/unit/provision/test_docs_say_what_roles_do.py does) are its package data, and a message names them
    by their installed path."""
    from tests.unit.provision.test_docs_say_what_roles_do import NAMED

    shipped = installed.site / "gpuready" / "docs"
    cited = {page for _, page, _ in NAMED}
    assert cited and {p for p in cited if not (shipped / p).is_file()} == set()
    assert {p.name for p in (ROOT / "docs").glob("*.md")} == {p.name for p in shipped.glob("*.md")}
    runs = str(installed.home / "runs-pytorch")
    done = installed.gpuready("validate", "training", "--framework", "pytorch", "--cpu", "--artifacts", runs)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"pip install 'gpuready[torch]' (see {shipped / 'pytorch.md'})" in done.stderr
    # The roles get the same folder: the runner hands it to Ansible.
    code = "from gpuready.core import docs; print(docs.folder())"
    where = installed.python(code)
    assert where.returncode == 0 and Path(where.stdout.strip()) == shipped, where.stderr
