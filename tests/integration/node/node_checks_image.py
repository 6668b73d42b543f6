"""The node-checks image (containers/node-checks/Containerfile), built here as a site without a registry builds it.

No registry is reachable from the test machines, so the base is the provisioning tests' own Debian 12 root
(``debian_root.root_tarball``, mmdebstrap, cached under the user's cache) imported with ``podman import``. The
build context is a folder of wheels: gpuready's, built from this checkout, and its dependencies', fetched by pip
with the machine's own index and certificates. The image is tagged by the hash of the Containerfile, of the
wheel's contents and of the base root, so a warm machine reuses it until one of them changes.

Debian's podman runs with runc and the cgroupfs manager: crun refuses the hybrid cgroups of these machines.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from gpuready.lab import cache_dir
from tests.conftest import ROOT
from tests.integration.provision import debian_root

CONTAINERFILE = ROOT / "containers" / "node-checks" / "Containerfile"
REPOSITORY = "localhost/gpuready-node-checks"
BASE_REPOSITORY = "localhost/gpuready-debian-root"
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
# runc applies the process limits it is given; podman's defaults (the host's) can exceed what runc may set here.
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
# A cold build (apt in both stages, about 60 wheels into a venv) took about four minutes on two shared cores.
BUILD_TIMEOUT = 1200


def prerequisites() -> tuple[bool, str]:
    ok, why = debian_root.prerequisites()
    if not ok:
        return ok, why
    for tool in ("podman", "runc", "git"):
        if shutil.which(tool) is None:
            return False, f"{tool} not installed (scripts/install-system-deps installs it)"
    return True, ""


def podman(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout)


def _exists(ref: str) -> bool:
    return podman("image", "exists", ref).returncode == 0


def _gpuready_wheel(dest: Path) -> Path:
    """gpuready's wheel from the files of this checkout git knows of (not stale build/ leftovers)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    source = dest / "source"
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    wheels = dest / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-input", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("gpuready-*.whl")
    return wheel


def _contents_hash(wheel: Path) -> str:
    """The hash of what the wheel holds: its zip headers carry the build's times, which differ every build."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            digest.update(name.encode() + b"\0" + zf.read(name))
    return digest.hexdigest()


def _base() -> str:
    tarball = debian_root.root_tarball()
    ref = f"{BASE_REPOSITORY}:{tarball.stem}"
    if not _exists(ref):
        done = podman("import", str(tarball), ref, timeout=600)
        assert done.returncode == 0, done.stderr
    return ref


def image(work: Path) -> str:
    """The image's reference, built on first use for this Containerfile, gpuready wheel and base root."""
    wheel = _gpuready_wheel(work)
    lock_dir = cache_dir() / "node-checks-image"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test sessions must not import or build it at the same time
        base = _base()
        key = hashlib.sha256(
            "\n".join([hashlib.sha256(CONTAINERFILE.read_bytes()).hexdigest(), _contents_hash(wheel), base]).encode()
        ).hexdigest()[:16]
        ref = f"{REPOSITORY}:test-{key}"
        if _exists(ref):
            return ref
        context = work / "context"
        context.mkdir()
        shutil.copy2(wheel, context)
        # The dependencies' wheels, as a site fetches them from its own index before an offline build.
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-input", "-w", str(context), str(wheel)],
            check=True,
            timeout=900,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
        done = podman(
            "build",
            *ULIMITS,
            # No intermediate images: the image is cached whole, by its key, and the build stage's would be left
            # behind, a gigabyte a key, once the image of its key is removed.
            "--layers=false",
            # apt in the build reaches the Debian mirror; pip installs from the context, without an index.
            "--network",
            "host",
            "--build-arg",
            f"BASE={base}",
            "-f",
            str(CONTAINERFILE),
            "-t",
            ref,
            str(context),
            timeout=BUILD_TIMEOUT,
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        _remove_older(ref)
    return ref


def _remove_older(ref: str) -> None:
    """Images of earlier checkouts: about a gigabyte each, of no use once the key has changed."""
    listed = podman("images", "--format", "{{.Repository}}:{{.Tag}}", REPOSITORY)
    for other in listed.stdout.split():
        if other != ref and other.startswith(f"{REPOSITORY}:test-"):
            podman("rmi", other)
