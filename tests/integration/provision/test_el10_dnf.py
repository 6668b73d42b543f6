"""What the driver role tells dnf on Enterprise Linux 10, done by a real dnf 4 and its versionlock plugin.

EL10 has no module streams (NVIDIA driver installation guide, 595 and 620, "Kernel Modules"): the role asks
`dnf repoquery` for the branches, holds the branch with `dnf versionlock '*nvidia*<branch>*'`, releases the holds of
another branch, and installs `nvidia-open-<branch>.*` or `cuda-drivers-<branch>.*` with `--allowerasing`. No EL10
node or NVIDIA rhel10 repository is reachable here, so Debian's dnf 4 (with dnf-plugins-core's versionlock, as RHEL 10
runs it) works in an install root against a local repository of stand-in packages built with rpmbuild: NVIDIA's
package names, epoch 3 on the driver packages as the rhel10 repository has it (nvidia-open-3:580.65.06-1.el10,
rocky-linux/rockylinux.org#201), the flavours' kernel-module packages in conflict, versions of two branches. The
strings come from the role itself (vars/RedHat-10.yml, tasks/install-redhat.yml) and its filter, and the role's install
task runs through Ansible's dnf module; what is under test is that dnf does with them what the role means: the branch
installed and kept through `dnf upgrade`, the flavour switched, the earlier branch's holds released, and the install
task idempotent.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, ModuleTmp, require
from tests.integration.provision import dnf_root
from tests.integration.provision.dnf_root import package
from tests.unit.provision.local_play import collection_filter, role_tasks, run_and_read, save

ROLE = ROOT / "playbooks" / "roles" / "nvidia_driver"
DISTRO = yaml.safe_load((ROLE / "vars" / "RedHat-10.yml").read_text())["nvidia_driver_distro"]
TASKS = role_tasks("nvidia_driver", "install-redhat.yml")
INSTALL = TASKS["Driver | Install the driver packages of the branch"]
REPOQUERY = TASKS["Driver | Read the driver versions the repository offers"]["ansible.builtin.command"]["cmd"]
pytestmark = pytest.mark.slow
driver_branches = collection_filter("driver_branches", "driver_index")
versionlock_other_branches = collection_filter("versionlock_other_branches", "driver_index")
VERSIONS = ("580.65.06", "580.126.20", "595.58.03")
#: What an install root holds with each branch and flavour installed (name-version).
OPEN_580 = ["kmod-nvidia-open-dkms-580.126.20", "nvidia-driver-580.126.20", "nvidia-open-580.126.20"]
OPEN_580_PINNED = ["kmod-nvidia-open-dkms-580.65.06", "nvidia-driver-580.65.06", "nvidia-open-580.65.06"]
PROPRIETARY_580 = ["cuda-drivers-580.126.20", "kmod-nvidia-latest-dkms-580.126.20", "nvidia-driver-580.126.20"]
OPEN_595 = ["kmod-nvidia-open-dkms-595.58.03", "nvidia-driver-595.58.03", "nvidia-open-595.58.03"]


class DriverRoot(dnf_root.Root):
    """An install root with the driver role's two lock tasks and its install request."""

    def hold(self, branch: str) -> None:
        """The role's two lock tasks: hold the branch, then release the other branches' holds (raw entries)."""
        for spec in DISTRO["versionlock"]:
            self.run("-q", "versionlock", "add", spec.replace("{branch}", branch))
        for entry in versionlock_other_branches(self.locks(), branch):
            self.run("-q", "versionlock", "delete", entry)

    def install(self, variant: str, branch: str, *, held: bool = True) -> None:
        """The role's install of a branch: its holds (``held``), then its request with ``--allowerasing``."""
        if held:
            self.hold(branch)
        self.run("install", "--allowerasing", *_request(variant, branch))


@pytest.fixture(scope="module")
def dnf(module_tmp: ModuleTmp) -> DriverRoot:
    require(*dnf_root.prerequisites())
    work = module_tmp("el10-dnf")
    top = work / "rpmbuild"
    for v in VERSIONS:
        driver = f"nvidia-driver = 3:{v}"
        package(top, "nvidia-driver", 3, v)
        package(top, "kmod-nvidia-open-dkms", 3, v, driver, "kmod-nvidia-latest-dkms")
        package(top, "kmod-nvidia-latest-dkms", 3, v, driver, "kmod-nvidia-open-dkms")
        package(top, "nvidia-open", 3, v, f"kmod-nvidia-open-dkms = 3:{v}, {driver}")
        package(top, "cuda-drivers", 0, v, f"kmod-nvidia-latest-dkms = 3:{v}, {driver}")
    dnf_root.repository(work, top, "stand-in of NVIDIA's rhel10 repository")
    return DriverRoot(work)


def _request(variant: str, branch: str) -> list[str]:
    names = DISTRO["variants"][variant]["packages"]
    return [DISTRO["unversioned"].replace("{name}", n).replace("{branch}", branch) for n in names]


def test_repoquery_as_the_role_asks_names_the_branches_the_repository_has(dnf: DriverRoot) -> None:
    program, *args = shlex.split(REPOQUERY)  # the task's own command line
    assert program == "dnf"
    answer = dnf.run(*args).stdout
    assert driver_branches(answer, DISTRO["index_family"]) == {
        "580": ["open", "proprietary"],
        "595": ["open", "proprietary"],
    }


def test_the_branch_is_installed_held_switched_and_changed_as_the_role_means(dnf: DriverRoot) -> None:
    run, installed, locks = dnf.run, dnf.installed, dnf.locks
    # A first install of 580 with the open modules: its newest version, and every 580 version of the driver packages
    # held (the guide's spec and cuda-drivers').
    dnf.install("open", "580")
    assert locks() and all(":580." in entry for entry in locks())
    assert installed() == OPEN_580
    # dnf upgrade keeps the node on the branch: 595 is in the repository, the holds keep it out.
    run("upgrade")
    assert installed() == OPEN_580
    # The proprietary flavour of the same branch replaces the open one (--allowerasing).
    dnf.install("proprietary", "580")
    assert installed() == PROPRIETARY_580
    # With RHEL's best=True the upgrade keeps it there too; held by the guide's spec alone, the next branch's
    # cuda-drivers (whose driver that spec excludes) makes it fail.
    run("upgrade", "--best")
    assert installed() == PROPRIETARY_580
    run("-q", "versionlock", "delete", "cuda-drivers")
    unheld = run("upgrade", "--best", ok=False)
    assert unheld.returncode != 0 and "cuda-drivers-595.58.03" in unheld.stderr, unheld.stdout + unheld.stderr
    # A change of branch: 595 installs (its request names it), and the holds of 580 go with the role's release.
    dnf.install("open", "595")
    assert locks() and all(":595." in entry for entry in locks())
    assert installed() == OPEN_595
    run("upgrade")
    assert installed() == OPEN_595
    # Why the release: back to 580 with the 595 holds left in place, the next `dnf upgrade` takes the node back to
    # 595; released as the role releases them, it stays on 580.
    for spec in DISTRO["versionlock"]:
        run("-q", "versionlock", "add", spec.replace("{branch}", "580"))
    dnf.install("open", "580", held=False)
    assert installed() == OPEN_580
    run("upgrade")
    assert installed() == OPEN_595
    dnf.install("open", "580")
    run("upgrade")
    assert installed() == OPEN_580


def test_the_roles_install_task_installs_switches_and_changes_nothing_the_second_time(
    dnf: DriverRoot, tmp_path: Path
) -> None:
    """The role's own install task through Ansible's dnf module (its dnf 4 backend, as on RHEL 10), pointed at an
    install root: the branch-named request installs, a pinned version of the branch replaces a newer one, and the
    same request again changes nothing."""
    root = dnf.fresh("ansible-root", home=tmp_path)  # the HOME run_local_play gives Ansible
    (tmp_path / "dnf.conf").write_text(
        f"[main]\nreposdir={dnf.work / 'repos.d'}\ncachedir={dnf.work / 'cache'}\n"
        f"pluginconfpath={dnf.work / 'plugins'}\n"
    )
    # What only this machine needs: the install root and its configuration; Debian's dnf under the system Python
    # (this machine's package manager is apt, so the module is told the backend RHEL 10's facts would give it).
    here = {"installroot": str(root.root), "conf_file": str(tmp_path / "dnf.conf"), "releasever": "10"}

    def apply(packages: list[str]) -> bool:
        args = INSTALL["ansible.builtin.dnf"] | {"use_backend": "dnf4"} | here
        plan = {"packages": packages, "allowerasing": DISTRO["allowerasing"]}  # what the plan gives the task on EL10
        play = [
            {
                "hosts": "localhost",
                "gather_facts": False,
                "vars": {"nvidia_driver_plan": plan},
                "tasks": [{"ansible.builtin.dnf": args, "register": "done"}, save("done.changed", tmp_path)],
            }
        ]
        return bool(run_and_read(tmp_path, play, "-e", "ansible_python_interpreter=/usr/bin/python3"))

    assert apply(_request("open", "580")) is True
    assert root.installed() == OPEN_580
    assert apply(_request("open", "580")) is False
    pinned = [DISTRO["versioned"].replace("{name}", "nvidia-open").replace("{version}", "580.65.06")]
    assert apply(pinned) is True
    assert root.installed() == OPEN_580_PINNED
    assert apply(pinned) is False
    assert apply(_request("proprietary", "580")) is True  # the flavour switched (--allowerasing)
    assert "nvidia-open-580.65.06" not in root.installed()
