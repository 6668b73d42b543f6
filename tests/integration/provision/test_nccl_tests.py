"""The nccl_tests role applied for real to Debian 12 roots through `gpuready provision cluster --tags nccl_tests`.

Real parts: a Debian 12 root built with mmdebstrap, Ansible's chroot connection, apt and dpkg inside the root,
make and g++ from Debian's archive, NVIDIA's real nvcc, CUDA runtime, CCCL and NCCL (from NVIDIA's PyPI wheels,
packaged under NVIDIA's package names in the signed stand-in CUDA repository: nccl_standin.py), NVIDIA's
nccl-tests at the role's pinned commit from a local git repository, and, for the CUDA version, the header of
nvidia-smi as recorded on an H100 with driver 580.159.04 ("CUDA Version: 13.0").
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, ModuleTmp, require
from tests.integration.provision import debian_root as dr
from tests.integration.provision import nccl_standin as ns

pytestmark = [pytest.mark.root, pytest.mark.slow]
H100_NVIDIA_SMI = ROOT / "tests" / "fixtures" / "gpu" / "recorded" / "h100-80gb-hbm3-580.159.04" / "22-nvidia-smi.out"
GIT_IN_ROOT = "srv/nccl-tests.git"
# One architecture keeps the real compile to a few minutes on two cores (nccl-tests src/common.mk: NVCC_GENCODE).
GENCODE = "-gencode=arch=compute_90,code=sm_90"
SETTINGS = {"nccl_tests": {"repo_url": f"file:///{GIT_IN_ROOT}", "nvcc_gencode": GENCODE}}
BUILD = f"opt/gpuready/nccl-tests/{ns.NCCL_TESTS_COMMIT}"
PACKAGES = f"make g++ git cuda-nvcc-13-0 cuda-cudart-dev-13-0 libnccl2={ns.NCCL_VERSION} libnccl-dev={ns.NCCL_VERSION}"


def _add_to_repo(work: Path, repo: Path, debs: list[Path]) -> None:
    """The NVIDIA stand-ins into the stand-in repository: its index rewritten and signed again with its key."""
    for deb in debs:
        dr.link_or_copy(deb, repo / "pool" / deb.name)
    dr.index_and_sign(repo, work / "gnupg")  # dr.build_repo's key


@pytest.fixture(scope="module")
def repo(module_tmp: ModuleTmp) -> Path:
    ok, why = dr.prerequisites()
    require(ok, why)
    require(shutil.which("git"), "git not installed")
    try:
        debs = ns.debs()
    except subprocess.CalledProcessError as e:
        require(False, f"cannot download NVIDIA's wheels from PyPI: {e}")
    work = module_tmp("standin")
    built = dr.build_repo(work)
    _add_to_repo(work, built, debs + ns.decoys(work / "decoys"))
    return built


def _node(repo: Path, tmp: Path, settings: dict[str, Any]) -> Iterator[tuple[Path, Path]]:
    """A root as the driver layer leaves it: NVIDIA's CUDA repository configured, nvidia-smi answering (CUDA 13.0)."""
    root = dr.fresh_root(tmp / "root", repo)
    dr.seed_nvidia_apt_setup(root)
    # The role refreshes an index older than an hour; a root built from a tarball made minutes before (a cold
    # cache) would keep an index without the CUDA repository, which the driver layer never leaves.
    dr.refresh_index(root)
    smi = root / "usr/bin/nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{H100_NVIDIA_SMI.read_text()}EOF\n")
    smi.chmod(0o755)
    ns.nccl_tests_git(root / GIT_IN_ROOT)
    with dr.booted_like(root):
        yield root, dr.write_inventory(tmp / "inventory", {"node1": root}, settings=settings)


def _classes(gpus: int) -> dict[str, Any]:
    return {**SETTINGS, "node_classes": {"standin": {"gpu_count": gpus}}}


@pytest.fixture(scope="module")
def node(repo: Path, module_tmp: ModuleTmp) -> Iterator[tuple[Path, Path]]:
    yield from _node(repo, module_tmp("node"), _classes(2))


@pytest.fixture(scope="module")
def first(node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, dict[str, Any], float]:
    _, inventory = node
    start = time.monotonic()
    done, summary = dr.provision(inventory, module_tmp("first"), "--tags", "nccl_tests")
    return done, summary, time.monotonic() - start


def test_the_first_run_builds_nccl_tests_against_nvidias_nccl_and_links_all_reduce_perf(
    first: Any, node: tuple[Path, Path]
) -> None:
    root, _ = node
    done, summary, seconds = first
    print(f"first run (apt, fetch, nccl-tests build): {seconds:.0f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    checks = dr.checks_by_id(summary)
    install = checks["nccl_tests.install"]
    assert install["status"] == "passed", install
    assert install["message"] == f"installed: {PACKAGES} (CUDA 13.0, from nvidia-smi)"
    assert "CUDA Version: 13.0" in install["evidence"]
    installed = dr.installed_packages(root)
    # The newest NCCL built for the driver's CUDA major: not the newer build for CUDA 12, not the older for 13.
    assert installed["libnccl-dev"] == installed["libnccl2"] == ns.NCCL_VERSION
    assert {"cuda-nvcc-13-0", "cuda-cudart-dev-13-0", "make", "g++", "git"} <= set(installed)
    build = checks["nccl_tests.build"]
    assert build["status"] == "passed", build
    assert build["message"] == (f"built /{BUILD}/build/all_reduce_perf; /usr/local/bin/all_reduce_perf linked to it")
    assert f"NVCC_GENCODE={GENCODE}" in build["evidence"]
    link = root / "usr/local/bin/all_reduce_perf"
    assert link.is_symlink() and str(link.readlink()) == f"/{BUILD}/build/all_reduce_perf"
    binary = root / BUILD / "build" / "all_reduce_perf"
    assert binary.read_bytes()[:4] == b"\x7fELF" and binary.stat().st_mode & 0o111
    # The source is the pinned commit.
    head = subprocess.run(
        ["git", "-C", str(root / BUILD), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert head == ns.NCCL_TESTS_COMMIT
    # The binary runs in the root as the check runs it (command -v, then the tool); --help needs no GPU.
    ran = subprocess.run(
        ["chroot", str(root), "/bin/sh", "-c", "command -v all_reduce_perf && all_reduce_perf --help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("/usr/local/bin/all_reduce_perf\nUSAGE: all_reduce_perf")
    assert "[-g,--ngpus <gpus per thread>]" in ran.stdout
    # Linked against NCCL from libnccl2, the CUDA runtime linked in (no libcudart.so to find at run time).
    needed = subprocess.run(
        ["chroot", str(root), "ldd", "/usr/local/bin/all_reduce_perf"], capture_output=True, text=True, check=True
    ).stdout
    # Debian 12 merges /lib into /usr/lib: ld.so names the library by either path.
    assert re.search(r"libnccl\.so\.2 => (/usr)?/lib/x86_64-linux-gnu/libnccl\.so\.2 ", needed), needed
    assert "libcudart" not in needed


@pytest.fixture(scope="module")
def second(first: Any, node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, ...]:
    root, inventory = node
    before = dr.snapshot(root, "etc", "usr", "opt", "var/lib/dpkg")
    done, summary = dr.provision(inventory, module_tmp("second"), "--tags", "nccl_tests")
    return done, summary, before, dr.snapshot(root, "etc", "usr", "opt", "var/lib/dpkg")


def test_the_second_run_changes_nothing(second: Any) -> None:
    done, summary, before, after = second
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary["metrics"]["changed"] == 0, summary["metrics"]["playbooks"]
    assert after == before
    checks = dr.checks_by_id(summary)
    assert checks["nccl_tests.install"]["message"].startswith("already installed: make g++ git cuda-nvcc-13-0")
    assert checks["nccl_tests.build"]["message"] == (
        f"already built: /{BUILD}/build/all_reduce_perf; /usr/local/bin/all_reduce_perf links to it"
    )


def test_remove_takes_away_the_build_when_asked(second: Any, node: tuple[Path, Path], tmp_path: Path) -> None:
    root, inventory = node
    kept, summary = dr.provision(inventory, tmp_path / "kept", "--remove", "--tags", "nccl_tests")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert dr.checks_by_id(summary)["nccl_tests.remove"]["status"] == "skipped"
    assert (root / "usr/local/bin/all_reduce_perf").is_symlink()
    settings = _classes(2)
    settings["nccl_tests"] = {**SETTINGS["nccl_tests"], "remove_on_uninstall": True}
    removing = dr.write_inventory(tmp_path / "inventory", {"node1": root}, settings=settings)
    summary = dr.passed(dr.provision(removing, tmp_path / "removed", "--remove", "--tags", "nccl_tests"))
    finding = dr.checks_by_id(summary)["nccl_tests.remove"]
    assert finding["status"] == "passed", finding
    assert not (root / "usr/local/bin/all_reduce_perf").is_symlink()
    assert not (root / "opt/gpuready/nccl-tests").exists()
    assert "libnccl2" in dr.installed_packages(root)  # NVIDIA's packages stay


@pytest.fixture(scope="module")
def untouched(repo: Path, module_tmp: ModuleTmp) -> Iterator[tuple[Path, Path]]:
    """A root that no test may change: check mode on an 8-GPU class, a real run on a one-GPU class."""
    yield from _node(repo, module_tmp("untouched"), _classes(8))


def _unchanged(root: Path, inventory: Path, runs: Path, *args: str) -> dict[str, Any]:
    """The run's summary, after asserting that the run passed and changed nothing in the root."""
    before = dr.snapshot(root, "etc", "usr", "opt", "var/lib/dpkg")
    summary = dr.passed(dr.provision(inventory, runs, "--tags", "nccl_tests", *args))
    assert dr.snapshot(root, "etc", "usr", "opt", "var/lib/dpkg") == before
    return summary


def test_check_mode_on_a_fresh_root_changes_nothing_and_says_what_it_would_do(
    untouched: tuple[Path, Path], tmp_path: Path
) -> None:
    root, inventory = untouched
    checks = dr.checks_by_id(_unchanged(root, inventory, tmp_path / "runs", "--check"))
    assert (checks["nccl_tests.install"]["status"], checks["nccl_tests.build"]["status"]) == ("skipped", "skipped")
    assert checks["nccl_tests.install"]["message"].startswith("check mode: would install make g++ git cuda-nvcc-13-0")
    assert checks["nccl_tests.build"]["message"] == (
        f"check mode: would fetch nccl-tests {ns.NCCL_TESTS_COMMIT} from file:///{GIT_IN_ROOT}, build it in /{BUILD}"
        " with /usr/local/cuda-13.0/bin/nvcc and link /usr/local/bin/all_reduce_perf to it"
    )


def test_a_one_gpu_class_gets_nothing(untouched: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = untouched
    one_gpu = dr.write_inventory(tmp_path / "inventory", {"node1": root}, settings=_classes(1))
    summary = _unchanged(root, one_gpu, tmp_path / "runs")
    assert summary["metrics"]["changed"] == 0
    finding = dr.checks_by_id(summary)["nccl_tests.build"]
    assert (finding["status"], finding["message"]) == (
        "skipped",
        "node class standin expects fewer than 2 GPUs: no nccl-tests",
    )


def test_no_nccl_built_for_the_cuda_major_installs_nothing_and_says_so(
    untouched: tuple[Path, Path], tmp_path: Path
) -> None:
    root, _ = untouched
    settings = _classes(8)
    settings["nccl_tests"] = {**SETTINGS["nccl_tests"], "cuda_version": "11.8"}
    inventory = dr.write_inventory(tmp_path / "inventory", {"node1": root}, settings=settings)
    before = dr.snapshot(root, "etc", "usr", "opt", "var/lib/dpkg")
    done, summary = dr.provision(inventory, tmp_path / "runs", "--tags", "nccl_tests")
    assert done.returncode == 1, done.stdout + done.stderr
    assert dr.snapshot(root, "etc", "usr", "opt", "var/lib/dpkg") == before
    checks = dr.checks_by_id(summary)
    finding = checks["nccl_tests.install"]
    assert (finding["status"], finding["message"]) == (
        "failed",
        "NVIDIA's CUDA repository offers no libnccl2 built for CUDA 11 (the CUDA version 11.8 is from "
        "gpuready.nccl_tests.cuda_version): nothing installed",
    )
    # apt-cache madison's list, newest first: what the repository does offer.
    assert finding["evidence"].index("2.31.0-1+cuda12.9") < finding["evidence"].index(ns.NCCL_VERSION)
    assert "nccl_tests.build" not in checks
