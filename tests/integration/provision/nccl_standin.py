"""Stand-ins for NVIDIA's CUDA compiler and NCCL packages that carry NVIDIA's real compiler and NCCL.

NVIDIA's CUDA 13 wheels on PyPI hold a whole nvcc (nvcc, cicc, ptxas, fatbinary, nvlink), the CUDA runtime, CCCL and
NCCL (tests/fixtures/nccl-tests/SOURCES.md). They are downloaded once, pinned, into the user's cache dir and
repackaged as .deb files under NVIDIA's package names, with files where those packages put them, so the
nccl_tests role's build in a Debian root is a real build. nccl-tests' source is NVIDIA's own history up to the
pinned tag, kept in the repository as a git bundle (the role's commit, by its hash; no network needed).
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from gpuready.lab import cache_dir

CACHE = cache_dir() / "nccl-tests-standin"
# NVIDIA's wheels of one CUDA release (13.0 Update 2: the versions cuda-toolkit==13.0.2 requires) and NCCL for it.
WHEELS = {
    "nvidia-cuda-nvcc": "13.0.88",
    "nvidia-cuda-crt": "13.0.88",
    "nvidia-nvvm": "13.0.88",
    "nvidia-cuda-runtime": "13.0.96",
    "nvidia-cuda-cccl": "13.0.85",
    "nvidia-nccl-cu13": "2.30.7",
}
CUDA = "13.0"
CUDA_HOME = f"/usr/local/cuda-{CUDA}"
NCCL_VERSION = f"{WHEELS['nvidia-nccl-cu13']}-1+cuda{CUDA}"
# Debian's multiarch folder, where NVIDIA's libnccl2 puts libnccl.so.2.
LIBDIR = "/usr/lib/x86_64-linux-gnu"
# NVIDIA/nccl-tests, tag v2.19.6 (the role's pin): `git bundle create ... v2.19.6` of its repository
# (tests/fixtures/nccl-tests/SOURCES.md).
NCCL_TESTS_BUNDLE = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-tests" / "nccl-tests-v2.19.6.bundle"
NCCL_TESTS_COMMIT = "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432"


PIP_DOWNLOAD = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]


def _wheels() -> dict[str, Path]:
    """The pinned wheels, downloaded on first use with pip (no dependencies: each is one NVIDIA component)."""
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    found = {}
    for name, version in WHEELS.items():
        stem = f"{name.replace('-', '_')}-{version}-"
        have = [w for w in dest.glob("*.whl") if w.name.startswith(stem)]
        if not have:
            subprocess.run(
                [*PIP_DOWNLOAD, "-d", str(dest), f"{name}=={version}"],
                check=True,
                timeout=1200,
            )
            have = [w for w in dest.glob("*.whl") if w.name.startswith(stem)]
        found[name] = have[0]
    return found


def _extract(wheel: Path, prefix: str, dest: Path) -> None:
    """The wheel's files under ``prefix`` into ``dest``, executables kept executable (the zip's mode bits)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(prefix):
                continue
            target = dest / info.filename.removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            executable = mode & 0o111 or "/bin/" in f"/{info.filename}"
            target.chmod(0o755 if executable else 0o644)


def _deb(out: Path, name: str, version: str, depends: str, stage: Path) -> Path:
    debian = stage / "DEBIAN"
    debian.mkdir(parents=True)
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
        f"Maintainer: gpuready tests <tests@gpuready.invalid>\n"
    )
    if depends:
        control += f"Depends: {depends}\n"
    control += f"Description: gpuready stand-in for NVIDIA's {name}, with NVIDIA's files from its PyPI wheels\n"
    (debian / "control").write_text(control)
    deb = out / f"{name}_{version}_amd64.deb"
    # Level 1: the NCCL library is 400 MB and the stand-in is built once.
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(stage), str(deb)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    return deb


def debs() -> list[Path]:
    """The stand-in .deb files, built once per set of wheel versions and cached."""
    key = hashlib.sha256(repr(sorted(WHEELS.items())).encode()).hexdigest()[:12]
    out = CACHE / f"debs-{key}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "done").is_file():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            wheels = _wheels()
            build = CACHE / f"build-{key}"
            shutil.rmtree(build, ignore_errors=True)
            cuda_pkg = CUDA.replace(".", "-")

            def stage(name: str) -> Path:
                return build / name

            home = CUDA_HOME.lstrip("/")
            # cuda-nvcc-X-Y: the compiler in /usr/local/cuda-X.Y/bin, its nvvm/ and crt headers (NVIDIA splits the
            # last two into cuda-nvvm-X-Y and cuda-crt-X-Y, which cuda-nvcc-X-Y depends on; one package here).
            nvcc = stage(f"cuda-nvcc-{cuda_pkg}")
            _extract(wheels["nvidia-cuda-nvcc"], "nvidia/cu13/", nvcc / home)
            _extract(wheels["nvidia-cuda-crt"], "nvidia/cu13/", nvcc / home)
            _extract(wheels["nvidia-nvvm"], "nvidia/cu13/", nvcc / home)
            (nvcc / home / "lib").rename(nvcc / home / "lib64")
            cccl = stage(f"cuda-cccl-{cuda_pkg}")
            _extract(wheels["nvidia-cuda-cccl"], "nvidia/cu13/include/", cccl / home / "include")
            # cuda-cudart-dev-X-Y: the runtime's headers and libraries in /usr/local/cuda-X.Y/{include,lib64}.
            cudart = stage(f"cuda-cudart-dev-{cuda_pkg}")
            _extract(wheels["nvidia-cuda-runtime"], "nvidia/cu13/", cudart / home)
            (cudart / home / "lib").rename(cudart / home / "lib64")
            (cudart / home / "lib64" / "libcudart.so").symlink_to("libcudart.so.13")
            # libnccl2: the library in the multiarch folder; libnccl-dev: nccl.h in /usr/include, the .so link.
            nccl_so = f"libnccl.so.{WHEELS['nvidia-nccl-cu13']}"
            lib = stage("libnccl2")
            _extract(wheels["nvidia-nccl-cu13"], "nvidia/nccl/lib/", lib / LIBDIR.lstrip("/"))
            (lib / LIBDIR.lstrip("/") / "libnccl.so.2").rename(lib / LIBDIR.lstrip("/") / nccl_so)
            (lib / LIBDIR.lstrip("/") / "libnccl.so.2").symlink_to(nccl_so)
            dev = stage("libnccl-dev")
            _extract(wheels["nvidia-nccl-cu13"], "nvidia/nccl/include/", dev / "usr/include")
            (dev / LIBDIR.lstrip("/")).mkdir(parents=True)
            (dev / LIBDIR.lstrip("/") / "libnccl.so").symlink_to("libnccl.so.2")
            versions = {
                f"cuda-nvcc-{cuda_pkg}": (f"{WHEELS['nvidia-cuda-nvcc']}-1", ""),
                f"cuda-cccl-{cuda_pkg}": (f"{WHEELS['nvidia-cuda-cccl']}-1", ""),
                f"cuda-cudart-dev-{cuda_pkg}": (f"{WHEELS['nvidia-cuda-runtime']}-1", f"cuda-cccl-{cuda_pkg}"),
                "libnccl2": (NCCL_VERSION, ""),
                "libnccl-dev": (NCCL_VERSION, f"libnccl2 (= {NCCL_VERSION})"),
            }
            for name, (version, depends) in versions.items():
                _deb(out, name, version, depends, stage(name))
            shutil.rmtree(build)
            (out / "done").write_text("")
    return sorted(out.glob("*.deb"))


def nccl_tests_git(dest: Path) -> Path:
    """A bare repository at ``dest`` with NVIDIA/nccl-tests' history up to the pinned tag, cloned from the bundle."""
    subprocess.run(
        ["git", "clone", "--quiet", "--bare", str(NCCL_TESTS_BUNDLE), str(dest)], check=True, capture_output=True
    )
    return dest


#: NCCL builds beside the stand-in's, empty: a newer one built for CUDA 12 and an older one for CUDA 13 (NVIDIA's
#: repository carries a build of each NCCL version per CUDA version).
DECOY_VERSIONS = ("2.31.0-1+cuda12.9", "2.28.9-1+cuda13.0")


def decoys(out: Path) -> list[Path]:
    """Empty libnccl2 and libnccl-dev of DECOY_VERSIONS, which a node whose driver runs CUDA 13 must not get."""
    made = []
    for version in DECOY_VERSIONS:
        folder = out / version
        folder.mkdir(parents=True)
        made.append(_deb(folder, "libnccl2", version, "", folder / "libnccl2"))
        made.append(_deb(folder, "libnccl-dev", version, f"libnccl2 (= {version})", folder / "libnccl-dev"))
    return made
