"""Canonical's netplan generator (Debian's netplan.io package), unpacked into the user's cache, not installed.

`generate --root-dir DIR` reads DIR/etc/netplan/*.yaml and writes the systemd-networkd files netplan would
give the system at boot, under DIR/run: the same parser and renderer Ubuntu runs. Installing netplan.io
would pull systemd onto this machine; unpacking its two packages is enough to run the generator.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

PACKAGES = ("netplan.io", "libnetplan0")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuready"


def _candidate(package: str) -> str:
    out = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True, check=False).stdout
    return next((line.split()[1] for line in out.splitlines() if line.strip().startswith("Candidate:")), "")


def generator() -> tuple[Path | None, str]:
    """(the generate program, "") or (None, why not)."""
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        return None, "needs apt-get and dpkg-deb (a Debian machine) to fetch netplan.io"
    version = _candidate("netplan.io")
    if not version or version == "(none)":
        return None, "apt knows no netplan.io package"
    home = CACHE / f"netplan-{version}"
    program = home / "usr/libexec/netplan/generate"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "netplan.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not program.is_file():
            debs = home.with_name(home.name + ".debs")
            debs.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                ["apt-get", "download", *PACKAGES], cwd=debs, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                return None, f"apt-get download {' '.join(PACKAGES)} failed: {done.stderr.strip()[-200:]}"
            for deb in debs.glob("*.deb"):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(home)], check=True)
            lib = home / "usr/lib/x86_64-linux-gnu"
            for so in lib.glob("libnetplan.so.*.*"):
                (lib / "libnetplan.so.0").unlink(missing_ok=True)
                (lib / "libnetplan.so.0").symlink_to(so.name)
    return (program if program.is_file() else None), "netplan.io unpacked without its generate program"


def generate(program: Path, root: Path) -> dict[str, str]:
    """netplan's systemd-networkd files for root/etc/netplan, by file name."""
    lib = program.parents[2] / "lib/x86_64-linux-gnu"
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib))
    subprocess.run([str(program), "--root-dir", str(root)], env=env, check=True, capture_output=True, text=True)
    return {p.name: p.read_text() for p in sorted((root / "run/systemd/network").glob("*"))}
