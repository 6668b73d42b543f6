"""Install roots that a real dnf 4 manages, on a local repository of stand-in rpms built with rpmbuild.

No Enterprise Linux node or NVIDIA repository is reachable here: Debian's dnf 4 (with dnf-plugins-core's versionlock,
as RHEL 10 runs it) works in an install root against packages named as NVIDIA's, so what dnf does with a role's
package specs is dnf's own doing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

TOOLS = ("dnf", "rpmbuild", "createrepo_c")
VERSIONLOCK_PLUGIN = Path("/usr/lib/python3/dist-packages/dnf-plugins/versionlock.py")


def prerequisites() -> tuple[bool, str]:
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        return (
            False,
            f"needs {', '.join(missing)} (scripts/install-system-deps: dnf, dnf-plugins-core, rpm, createrepo-c)",
        )
    if not VERSIONLOCK_PLUGIN.exists():
        return False, "needs dnf's versionlock plugin (Debian's dnf-plugins-core)"
    return True, ""


def package(
    top: Path, name: str, epoch: int, version: str, requires: str = "", conflicts: str = "", release: str = "1.el10"
) -> None:
    """A noarch rpm of ``name`` with no files, built into ``top`` with rpmbuild."""
    spec = top / "SPECS" / f"{name}-{version}-{release}.spec"
    spec.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"Name: {name}",
        f"Epoch: {epoch}",
        f"Version: {version}",
        f"Release: {release}",
        "Summary: stand-in of NVIDIA's package of this name",
        "License: none",
        "BuildArch: noarch",
        *([f"Requires: {requires}"] if requires else []),
        *([f"Conflicts: {conflicts}"] if conflicts else []),
        "%description",
        "stand-in",
        "%files",
    ]
    spec.write_text("\n".join(lines) + "\n")
    subprocess.run(["rpmbuild", "--define", f"_topdir {top}", "-bb", str(spec)], check=True, capture_output=True)


def repository(work: Path, top: Path, about: str) -> Path:
    """The rpms built under ``top`` as a repository dnf is pointed at (``work``/repos.d), and an empty lock list."""
    repo = work / "repo"
    repo.mkdir()
    for rpm in (top / "RPMS").rglob("*.rpm"):
        shutil.copy(rpm, repo)
    subprocess.run(["createrepo_c", "-q", str(repo)], check=True)
    (work / "repos.d").mkdir()
    (work / "repos.d" / "cuda.repo").write_text(f"[gpuready-cuda]\nname={about}\nbaseurl=file://{repo}\ngpgcheck=0\n")
    (work / "plugins").mkdir()
    (work / "plugins" / "versionlock.conf").write_text(f"[main]\nenabled = 1\nlocklist = {work / 'locks'}\n")
    (work / "locks").write_text("")
    return repo


class Root:
    """An install root that dnf manages, its repository the stand-in one and its version locks a file of its own."""

    def __init__(self, work: Path, root: str = "root", home: Path | None = None) -> None:
        self.work = work
        self.root = work / root
        # Debian's rpm keeps its database under $HOME (%_dbpath ~/.rpmdb, RHEL's is /var/lib/rpm), inside the
        # install root: whoever writes and reads a root must agree on HOME.
        self.env = {**os.environ, "HOME": str(home or Path.home())}

    def fresh(self, root: str, home: Path) -> Root:
        """Another install root on the same repository and locks, its database under ``home``."""
        return type(self)(self.work, root, home)

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        w = self.work
        done = subprocess.run(
            [
                "dnf",
                f"--installroot={self.root}",
                f"--setopt=reposdir={w / 'repos.d'}",
                f"--setopt=cachedir={w / 'cache'}",
                f"--setopt=pluginconfpath={w / 'plugins'}",
                "--releasever=10",
                "-y",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=self.env,
        )
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def installed(self, form: str = "%{NAME}-%{VERSION}") -> list[str]:
        """What rpm says the root holds, a line each in rpm's query ``form``, sorted."""
        query = ["rpm", "--root", str(self.root), "-qa", "--qf", form + "\n"]
        return sorted(subprocess.run(query, capture_output=True, text=True, check=True, env=self.env).stdout.split())

    def locks(self) -> list[str]:
        lines = (self.work / "locks").read_text().splitlines()
        return [line for line in lines if line and not line.startswith("#")]
