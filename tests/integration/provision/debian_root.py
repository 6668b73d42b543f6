"""Real Debian 12 roots for the provisioning tests, and a local apt repository of stand-in NVIDIA packages.

The root is built once with mmdebstrap and cached as a tarball in the user's cache dir
(``gpuready.lab.cache_dir() / "debian-roots"``); each test extracts a fresh copy and points
Ansible's chroot connection at it.
The stand-in packages are real .deb files built with dpkg-deb, in a flat repository signed
with a throw-away GnuPG key, so apt verifies them exactly as it verifies NVIDIA's.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path
from typing import Any

import yaml

from gpuready.lab import cache_dir
from tests.conftest import gpuready
from tests.integration.provision import nvidia_ctk

CACHE = cache_dir() / "debian-roots"
# python3 for Ansible; containerd is the real runtime the toolkit role configures; the SELinux
# userspace and policy let semanage and matchpathcon evaluate the rules inside the root.
ROOT_PACKAGES = [
    "python3",
    "python3-apt",
    "openssh-client",
    "containerd",
    "kmod",
    "selinux-policy-default",
    "python3-selinux",
    "python3-semanage",
    "policycoreutils-python-utils",
    "selinux-utils",
    # Debian's own network configuration (ifup/ifquery), which the fabric role writes for its ports.
    "ifupdown",
]
# Where the stand-in repository is placed inside a root, and the URL Ansible is given for it.
REPO_IN_ROOT = "srv/gpuready-standin"
REPO_URL = f"file:///{REPO_IN_ROOT}/"
# NVIDIA publishes the toolkit in its own repository with its own key reference: a second path to the same files.
TOOLKIT_REPO_URL = f"file:///{REPO_IN_ROOT}-toolkit/"
# The kernel the root "will boot": the stand-in repository carries its headers package.
STANDIN_KERNEL = "6.1.0-gpuready-standin"
# 590, a newer branch under the same unversioned names (nvidia-driver), is what apt would take without a hold.
DRIVER_VERSIONS = {"535": ["535.183.01"], "550": ["550.54.15", "550.90.07"], "590": ["590.48.01"]}
# The toolkit package carries NVIDIA's real nvidia-ctk, built from its Go module at this release.
TOOLKIT_VERSION = nvidia_ctk.VERSION.removeprefix("v")


def prerequisites() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "needs root (chroot, mmdebstrap)"
    for tool in ("mmdebstrap", "dpkg-deb", "dpkg-scanpackages", "gpg", "chroot"):
        if shutil.which(tool) is None:
            return False, f"{tool} not installed (scripts/install-system-deps installs it)"
    return True, ""


def root_tarball() -> Path:
    """The cached Debian 12 root, built on first use (about two minutes with a nearby mirror)."""
    key = hashlib.sha256(" ".join(ROOT_PACKAGES).encode()).hexdigest()[:12]
    tarball = CACHE / f"debian12-{key}.tar"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test sessions must not build it at the same time
        if not tarball.is_file():
            # mmdebstrap picks its output format from the name: keep ".tar" last, and say so too.
            partial = tarball.with_name(f"{tarball.stem}.partial.tar")
            for leftover in (partial, tarball):  # an interrupted or older build
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                leftover.unlink(missing_ok=True)
            subprocess.run(
                [
                    "mmdebstrap",
                    "--quiet",
                    "--format=tar",
                    "--variant=apt",
                    f"--include={','.join(ROOT_PACKAGES)}",
                    "bookworm",
                    str(partial),
                ],
                check=True,
                timeout=900,
            )
            partial.rename(tarball)
    return tarball


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """A hard link where both are on one filesystem (the cache and the test's folder may not be), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def fresh_root(dest: Path, repo: Path) -> Path:
    """A new root from the cached tarball, with the stand-in repository copied in."""
    dest.mkdir(parents=True)
    with tarfile.open(root_tarball()) as tar:
        tar.extractall(dest, filter="fully_trusted")  # our own tarball: device nodes, owners and modes as built
    # Linked, not copied: apt reads a file: repository in place and nothing writes to it, and a repository of
    # real compilers (the nccl_tests stand-ins, 330 MB) copied into every root is disk the slow tier runs short of.
    shutil.copytree(repo, dest / REPO_IN_ROOT, copy_function=link_or_copy)
    (dest / f"{REPO_IN_ROOT}-toolkit").symlink_to(Path(REPO_IN_ROOT).name)
    return dest


def _deb(
    build: Path, out: Path, name: str, version: str, depends: str = "", files: dict[str, str | Path] | None = None
) -> None:
    pkg = build / f"{name}_{version}"
    (pkg / "DEBIAN").mkdir(parents=True)
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: gpuready tests <tests@gpuready.invalid>\n"
    )
    if depends:
        control += f"Depends: {depends}\n"
    control += f"Description: gpuready stand-in for {name}\n"
    (pkg / "DEBIAN" / "control").write_text(control)
    for path, content in (files or {}).items():
        target = pkg / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_text(content)
        target.chmod(0o755 if "/bin/" in path else 0o644)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(pkg), str(out / f"{name}_{version}_all.deb")],
        check=True,
        capture_output=True,
    )


NVIDIA_SMI = """#!/bin/sh
# Stand-in: the real nvidia-smi talks to the kernel module; this one knows only its version.
case "$*" in *driver_version*) echo {version};; *) echo "NVIDIA-SMI {version} (gpuready stand-in)";; esac
"""

MLXCONFIG = r"""#!/bin/sh
# Stand-in for MFT's mlxconfig: ATS_ENABLED per device, kept in state files (firmware NVRAM on a real NIC). A set
# writes the Next Boot value; the Current value changes only at a firmware reset or reboot, which a test makes by
# copying <dev> to <dev>.current. -e adds the Default and Current columns, laid out as mstflint's mlxcfg_ui.cpp
# prints them (printConfHeader, printSingleParam: "*" marks a row whose next value differs).
state=/var/lib/mlxconfig-standin
mkdir -p "$state"
verbose=
while [ $# -gt 0 ]; do
  case "$1" in -d) dev="$2"; shift 2;; -y) shift;; -e) verbose=1; shift;; *) break;; esac
done
[ -e "$dev" ] || { echo "-E- Failed to open device: $dev" >&2; exit 3; }
f="$state/$(basename "$dev")"
case "$1 $2" in
  "query ATS_ENABLED")
    next=$(cat "$f" 2>/dev/null || echo "False(0)")
    current=$(cat "$f.current" 2>/dev/null || echo "False(0)")
    if [ -n "$verbose" ]; then
      mark=" "; [ "$next" != "$current" ] || [ "$next" != "False(0)" ] && mark="*"
      printf 'Device #1:\nConfigurations:                              Default         Current         Next Boot\n'
      printf '%s        %-36s%-16s%-16s%-16s\n' "$mark" ATS_ENABLED "False(0)" "$current" "$next"
    else
      printf 'Device #1:\nConfigurations:      Next Boot\n        ATS_ENABLED         %s\n' "$next"
    fi;;
  "set ATS_ENABLED=true")
    echo "True(1)" > "$f"; echo "Applying... Done!"; echo "-I- Please reboot machine to load new configurations.";;
  *) echo "stand-in mlxconfig: unsupported: $*" >&2; exit 2;;
esac
"""

MST = """#!/bin/sh
# Stand-in for MFT's mst: "mst start" creates the /dev/mst device files mlxconfig opens (MFT manual, mst).
case "$1" in
  start) mkdir -p /dev/mst && : > /dev/mst/mt4123_pciconf0 && echo "Starting MST (Mellanox Software Tools) driver set";;
  *) echo "stand-in mst: unsupported: $*" >&2; exit 2;;
esac
"""

IBDEV2NETDEV = """#!/bin/sh
# Stand-in for OFED's ibdev2netdev on a dual-port ConnectX-6: the second port is down.
echo "mlx5_0 port 1 ==> ens1f0np0 (Up)"
echo "mlx5_1 port 1 ==> ens1f1np1 (Down)"
"""


# A node double for systemd: enough of systemctl(1) for ansible.builtin.systemd_service (show, is-enabled, enable,
# start, restart), with unit state kept in files. nvidia-persistenced fails to start the way the real daemon does
# while the NVIDIA device files are missing: the message of setup_devices() in NVIDIA/nvidia-persistenced,
# nvidia-persistenced.c, which exits on it.
SYSTEMCTL = r"""#!/bin/sh
state=/var/lib/systemctl-double
mkdir -p "$state"
echo "$*" >> "$state/calls"
action=$1; unit=${2%.service}
case $action in
  show)
    active=inactive; [ -e "$state/$unit.active" ] && active=active
    printf 'Id=%s.service\nLoadState=loaded\nActiveState=%s\nSubState=dead\n' "$unit" "$active";;
  is-enabled)
    if [ -e "$state/$unit.enabled" ]; then echo enabled; else echo disabled; exit 1; fi;;
  enable) : > "$state/$unit.enabled";;
  disable) rm -f "$state/$unit.enabled";;
  start|restart)
    if [ "$unit" = nvidia-persistenced ] && [ ! -e /dev/nvidiactl ]; then
      echo "nvidia-persistenced: Failed to query NVIDIA devices. Please ensure that the NVIDIA device files" \
        "(/dev/nvidia*) exist, and that user 0 has read and write permissions for those files." >&2
      echo "Job for nvidia-persistenced.service failed because the control process exited with error code." >&2
      exit 1
    fi
    : > "$state/$unit.active";;
  stop) rm -f "$state/$unit.active";;
  daemon-reload) ;;
  *) echo "systemctl double: unsupported: $*" >&2; exit 2;;
esac
"""


def install_systemctl_double(root: Path) -> Path:
    """Put the systemctl double in the root; returns its state folder (unit files and the calls it got)."""
    target = root / "usr" / "bin" / "systemctl"
    target.unlink(missing_ok=True)
    target.write_text(SYSTEMCTL)
    target.chmod(0o755)
    return root / "var" / "lib" / "systemctl-double"


DCGMI = """#!/bin/sh
# Stand-in for DCGM's dcgmi: the real one talks to the nv-hostengine of the nvidia-dcgm service.
echo "dcgmi (gpuready stand-in)"
"""
# NVIDIA's unit as the DCGM 4 packages install it (the service the DCGM docs enable: nvidia-dcgm).
DCGM_UNIT = """[Unit]
Description=NVIDIA DCGM service (gpuready stand-in)
[Service]
ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm
[Install]
WantedBy=multi-user.target
"""
#: The CUDA majors of the stand-in DCGM 4 packages (datacenter-gpu-manager-4-cuda<major>).
DCGM_CUDA_MAJORS = (12, 13)


def build_repo(dest: Path) -> Path:
    """A signed flat apt repository of stand-in NVIDIA packages; the public key is ``3bf863cc.pub`` as NVIDIA's."""
    build = dest / "build"
    repo = dest / "repo"
    (repo / "pool").mkdir(parents=True)
    build.mkdir()
    pool = repo / "pool"
    for branch, versions in DRIVER_VERSIONS.items():
        for v in versions:
            _deb(build, pool, "nvidia-driver", f"{v}-1", files={"/usr/bin/nvidia-smi": NVIDIA_SMI.format(version=v)})
            _deb(
                build, pool, f"cuda-drivers-{branch}", f"{v}-1", depends=f"nvidia-driver (= {v}-1), nvidia-persistenced"
            )
            # NVIDIA's Fabric Manager package of the branch, versioned as the driver (apt-packaging-fabric-manager).
            _deb(build, pool, f"nvidia-fabricmanager-{branch}", f"{v}-1")
    _deb(
        build, pool, "nvidia-persistenced", "550.90.07-1", files={"/usr/bin/nvidia-persistenced": "#!/bin/sh\nexit 0\n"}
    )
    _deb(
        build,
        pool,
        "nvidia-container-toolkit",
        f"{TOOLKIT_VERSION}-1",
        files={"/usr/bin/nvidia-ctk": nvidia_ctk.build()},
    )
    _deb(
        build,
        pool,
        f"linux-headers-{STANDIN_KERNEL}",
        "1.0",
        files={f"/usr/src/linux-headers-{STANDIN_KERNEL}/Makefile": "# stand-in kernel headers\n"},
    )
    _deb(
        build,
        pool,
        "mft-standin",
        "4.30.0-1",
        files={"/usr/bin/mlxconfig": MLXCONFIG, "/usr/bin/ibdev2netdev": IBDEV2NETDEV, "/usr/bin/mst": MST},
    )
    # As NVIDIA splits DCGM 4: a core package (dcgmi, the service) and one package per CUDA major beside it.
    _deb(
        build,
        pool,
        "datacenter-gpu-manager-4-core",
        "4.4.2-1",
        files={"/usr/bin/dcgmi": DCGMI, "/usr/lib/systemd/system/nvidia-dcgm.service": DCGM_UNIT},
    )
    for major in DCGM_CUDA_MAJORS:
        _deb(
            build,
            pool,
            f"datacenter-gpu-manager-4-cuda{major}",
            "4.4.2-1",
            depends="datacenter-gpu-manager-4-core (= 4.4.2-1)",
            files={f"/usr/lib/datacenter-gpu-manager-4/cuda{major}/README": f"stand-in CUDA {major} build\n"},
        )
    home = dest / "gnupg"
    home.mkdir(mode=0o700)
    gpg = _gpg(home)
    subprocess.run(
        [*gpg, "--quick-gen-key", "gpuready stand-in <standin@gpuready.invalid>", "ed25519", "sign", "never"],
        check=True,
        capture_output=True,
    )
    key = subprocess.run([*gpg, "--armor", "--export"], check=True, capture_output=True, text=True).stdout
    (repo / "3bf863cc.pub").write_text(key)
    index_and_sign(repo, home)
    return repo


# NVIDIA's own apt setup, as its documents write it. cuda-keyring installs
# /etc/apt/sources.list.d/cuda-<distro>-<arch>.list and /usr/share/keyrings/cuda-archive-keyring.gpg (NVIDIA driver
# installation guide, "Network repository installation"); the Container Toolkit install guide writes
# nvidia-container-toolkit.list from NVIDIA's published file with sed, adding its keyring. One named edit each: the
# URI is the stand-in repository's (the toolkit one keeps apt's $(ARCH)); the keyrings hold the stand-in's key,
# dearmored as NVIDIA's instructions do.
NVIDIA_CUDA_LIST = "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {uri} /\n"
NVIDIA_TOOLKIT_LIST = (
    "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] {uri}$(ARCH) /\n"
    "#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] {experimental}$(ARCH) /\n"
)
# Where the toolkit stand-in is reached with an architecture folder, as NVIDIA's stable/deb/<arch>/.
TOOLKIT_ARCH_BASE = f"/{REPO_IN_ROOT}-deb/"


def _gpg(home: Path) -> list[str]:
    return ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]


def index_and_sign(repo: Path, home: Path) -> None:
    """The flat repository's Packages and Release from what its pool holds, and InRelease signed with the key in
    ``home`` (apt verifies it as it verifies NVIDIA's); run again after adding packages."""
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (repo / "Packages").write_text(packages)
    digest = hashlib.sha256(packages.encode()).hexdigest()
    (repo / "Release").write_text(
        textwrap.dedent(f"""\
        Origin: gpuready-standin
        Label: gpuready stand-in NVIDIA packages
        Date: {formatdate(usegmt=True)}
        SHA256:
         {digest} {len(packages.encode())} Packages
        """)
    )
    subprocess.run(
        [*_gpg(home), "--yes", "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")],
        check=True,
        capture_output=True,
    )
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)


def seed_nvidia_apt_setup(root: Path, arch: str = "amd64") -> None:
    """NVIDIA's own sources and keyrings in the root, before gpuready runs."""
    keyrings = root / "usr/share/keyrings"
    keyrings.mkdir(parents=True, exist_ok=True)
    for name in ("cuda-archive-keyring.gpg", "nvidia-container-toolkit-keyring.gpg"):
        subprocess.run(
            ["gpg", "--dearmor", "--yes", "-o", str(keyrings / name), str(root / REPO_IN_ROOT / "3bf863cc.pub")],
            check=True,
            capture_output=True,
        )
    (root / TOOLKIT_ARCH_BASE.strip("/")).mkdir(parents=True, exist_ok=True)
    (root / TOOLKIT_ARCH_BASE.strip("/") / arch).symlink_to(f"../{Path(REPO_IN_ROOT).name}")
    lists = root / "etc/apt/sources.list.d"
    (lists / "cuda-debian12-x86_64.list").write_text(NVIDIA_CUDA_LIST.format(uri=REPO_URL))
    (lists / "nvidia-container-toolkit.list").write_text(
        NVIDIA_TOOLKIT_LIST.format(uri=f"file://{TOOLKIT_ARCH_BASE}", experimental=f"file://{TOOLKIT_ARCH_BASE}x/")
    )


def refresh_index(root: Path) -> None:
    """apt's index of the root read again from every source it lists (NVIDIA's CUDA repository included), as the driver
    layer leaves a node: it refreshes the index when it adds the repository."""
    subprocess.run(["chroot", str(root), "apt-get", "update"], check=True, capture_output=True, timeout=600)


def install_in_root(root: Path, *debs: str) -> None:
    """Install stand-in packages with dpkg inside the root (the state a node had before gpuready)."""
    paths = [f"/{REPO_IN_ROOT}/pool/{d}" for d in debs]
    subprocess.run(["chroot", str(root), "dpkg", "-i", *paths], check=True, capture_output=True)


def write_inventory(
    dest: Path, roots: dict[str, Path], *, settings: dict | None = None, host_vars: dict | None = None
) -> Path:
    """An inventory whose gpu_nodes are the given roots, reached with Ansible's chroot connection."""
    gpuready = {
        "node_classes": {"standin": {"gpu_count": 0}},
        "driver": {"branch": "550", "version": "550.54.15", "repo_url": REPO_URL},
        "container_runtime": "containerd",
        "preflight": {"min_free_disk_gib": 0},
        **(settings or {}),
    }
    chroot_vars = {
        "ansible_connection": "community.general.chroot",
        "ansible_python_interpreter": "/usr/bin/python3",
        # A root built for a GPU node has no GPUs of its own (and the node class says 0, so preflight passes).
        "nvidia_driver_wanted": True,
        "nvidia_container_toolkit_wanted": True,
        # What a root cannot do, switched off explicitly: the results then say what is pending.
        "nvidia_driver_manage_kernel": False,
        "nvidia_driver_manage_services": False,
        "nvidia_driver_rebuild_initramfs": False,
        "nvidia_driver_kernel_release": STANDIN_KERNEL,
        "nvidia_container_toolkit_manage_services": False,
        "nvidia_container_toolkit_repo_url": TOOLKIT_REPO_URL,
        "nvidia_container_toolkit_repo_key_url": f"{TOOLKIT_REPO_URL}3bf863cc.pub",
        "gpu_selinux_relabel": False,
        # The stand-in packages carry the version numbers of branches NVIDIA has retired (535, 550).
        "nvidia_driver_allow_end_of_life": True,
        **(host_vars or {}),
    }
    hosts = {name: {"ansible_host": str(path)} for name, path in roots.items()}
    (dest / "group_vars" / "all").mkdir(parents=True)
    (dest / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": chroot_vars}}))
    (dest / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": gpuready}))
    return dest


@contextmanager
def booted_like(root: Path) -> Iterator[Path]:
    """Make the root look to Ansible's facts as a booted Debian does: / a mount, /proc mounted, /etc/mtab.

    Only the mount table; services, kernel modules and reboots stay impossible and the test
    inventory switches them off explicitly.
    """
    subprocess.run(["mount", "--bind", str(root), str(root)], check=True)
    try:
        subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
        mtab = root / "etc" / "mtab"
        if not mtab.is_symlink():
            mtab.symlink_to("../proc/self/mounts")  # systemd-tmpfiles makes this link on a booted system
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root / "proc")], check=False, capture_output=True)
        subprocess.run(["umount", "-l", str(root)], check=False, capture_output=True)


# Debian's reference policy has no container module; RHEL's container-selinux declares this type and
# the boolean that lets containers open xserver_misc_device_t devices (container-selinux pull request 306).
# The stand-in declares the same names so the rules and the boolean can be stored and evaluated.
CONTAINER_SELINUX_STANDIN = """(type container_file_t)
(roletype object_r container_file_t)
(typeattributeset file_type (container_file_t))
(boolean container_use_xserver_devices false)
"""


def load_container_selinux_standin(root: Path) -> None:
    (root / "tmp" / "container-standin.cil").write_text(CONTAINER_SELINUX_STANDIN)
    subprocess.run(
        ["chroot", str(root), "semodule", "-i", "/tmp/container-standin.cil"], check=True, capture_output=True
    )


def persistent_booleans(root: Path) -> dict[str, str]:
    """The booleans the root's policy store customises, with their persistent value (semanage's second column)."""
    out = subprocess.run(
        ["chroot", str(root), "semanage", "boolean", "--list", "--noheading", "--locallist"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {line.split()[0]: line.split("(")[1].split(",")[1].split(")")[0].strip() for line in out.splitlines()}


def snapshot(root: Path, *parts: str) -> dict[str, tuple[int, int, int]]:
    """Path -> (size, mtime, mode) of everything under the given folders of the root."""
    state = {}
    for part in parts:
        for dirpath, dirnames, filenames in os.walk(root / part):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                st = path.lstat()
                state[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return state


def provision(inventory: Path, runs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``gpuready provision cluster`` on a root's inventory: what it printed, and the summary of its run."""
    done = gpuready("provision", "cluster", "-i", str(inventory), "--artifacts", str(runs), *args, timeout=900)
    [summary] = sorted(runs.glob("*/summary.json"))[-1:]
    return done, json.loads(summary.read_text())


def passed(run: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> dict[str, Any]:
    """A gpuready run's summary, once it exited 0; else the test fails with what it printed."""
    done, summary = run
    assert done.returncode == 0, done.stdout + done.stderr
    return summary


def checks_by_id(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in summary["checks"]}


def installed_packages(root: Path) -> dict[str, str]:
    """The packages dpkg has installed in ``root`` ("ii"), with their versions."""
    out = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {p: v for p, v, status in (line.split(" ", 2) for line in out.splitlines()) if status.startswith("ii")}
