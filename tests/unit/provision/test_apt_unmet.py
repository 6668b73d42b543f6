"""The apt_unmet filter judges package requests as ansible.builtin.apt (state=present) does.

The oracle is the apt module itself: each case is also run through ansible.builtin.apt in check
mode against this machine's real dpkg database and apt cache, and the filter must agree on whether
apt would install something. Wildcard requests are judged from what the driver role's
read-apt-state.sh reads on the same machine (parsed by the apt_state filter), whose packages must
also equal package_facts'.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT, require
from tests.unit.provision.local_play import collection_filter, run_and_read, save

READ_APT_STATE = ROOT / "playbooks" / "roles" / "nvidia_driver" / "files" / "read-apt-state.sh"


apt_unmet = collection_filter("apt_unmet")
apt_state = collection_filter("apt_state")


def _installed(name: str) -> str:
    return subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", name], capture_output=True, text=True, check=True
    ).stdout


def test_plain_names_and_exact_versions_are_decided_from_the_installed_packages() -> None:
    packages = {"nvidia-driver": [{"name": "nvidia-driver", "version": "550.54.15-1", "source": "apt"}]}
    assert apt_unmet(["nvidia-driver"], packages) == []
    assert apt_unmet(["nvidia-driver=550.54.15-1"], packages) == []
    assert apt_unmet(["nvidia-driver=550.90.07-1"], packages) == ["nvidia-driver=550.90.07-1"]
    assert apt_unmet(["cuda-drivers-550", "nvidia-driver"], packages) == ["cuda-drivers-550"]
    # apt also upgrades to a newer candidate matching a version wildcard: only apt's cache can tell.
    undecidable = ["nvidia-driver=550.54.15-*", "nvidia-driver>=550", "nvidia-*", "nvidia-driver:amd64"]
    assert apt_unmet(undecidable, packages) == undecidable


def test_a_version_wildcard_is_met_only_when_apts_pinned_candidate_is_the_installed_version() -> None:
    packages = {"nvidia-driver": [{"name": "nvidia-driver", "version": "550.54.15-1", "source": "apt"}]}
    wildcard = ["nvidia-driver=550.54.15-*"]
    assert apt_unmet(wildcard, packages, {"nvidia-driver": "550.54.15-1"}) == []
    # A newer revision matches too: apt would install it.
    assert apt_unmet(wildcard, packages, {"nvidia-driver": "550.54.15-2"}) == wildcard
    # The installed version does not match the wildcard: apt would install the candidate.
    newer = ["nvidia-driver=550.90.*"]
    assert apt_unmet(newer, packages, {"nvidia-driver": "550.90.07-1"}) == newer
    # No candidate read for it, or not installed at all: apt decides.
    assert apt_unmet(wildcard, packages, {}) == wildcard
    missing = ["cuda-drivers-550=550.*"]
    assert apt_unmet(missing, packages, {"cuda-drivers-550": "550.54.15-1"}) == missing
    # Still undecidable with candidates: >=, name wildcards, architectures.
    assert apt_unmet(["nvidia-driver>=550", "nvidia-*=1"], packages, {"nvidia-driver": "550.54.15-1"}) == [
        "nvidia-driver>=550",
        "nvidia-*=1",
    ]


def test_agrees_with_the_apt_module_in_check_mode(tmp_path: Path) -> None:
    require(shutil.which("dpkg-query") and _python_apt(), "needs dpkg and python3-apt (Debian)")
    version = _installed("dpkg")
    upstream = version.rsplit("-", 1)[0]
    wildcards = ["dpkg=*", f"dpkg={upstream}*", "dpkg=0.0.0-*", "gpuready-no-such-package=1.*"]
    requests = ["dpkg", f"dpkg={version}", "dpkg=0.0.0-not-this", "gpuready-no-such-package", *wildcards]
    play = [
        {
            "name": "What apt would do",
            "hosts": "all",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "/usr/bin/python3"},
            "tasks": [
                {"name": "Packages", "ansible.builtin.package_facts": {"manager": "apt"}},
                {
                    "name": "Apt",
                    "ansible.builtin.apt": {"name": "{{ item }}", "state": "present"},
                    "loop": requests,
                    "check_mode": True,
                    "register": "apt",
                    "ignore_errors": True,
                },
                save("{'results': apt.results, 'packages': ansible_facts['packages']}", tmp_path),
            ],
        }
    ]
    out = run_and_read(tmp_path, play)
    # apt acts when it would install, or fails because it cannot: either way the task must run.
    apt_acts = {r["item"]: bool(r.get("changed") or r.get("failed")) for r in out["results"]}
    assert {r: acts for r, acts in apt_acts.items() if r not in wildcards} == {
        "dpkg": False,
        f"dpkg={version}": False,
        "dpkg=0.0.0-not-this": True,
        "gpuready-no-such-package": True,
    }
    # Whether apt would upgrade dpkg=* depends on this machine's apt lists; its own upstream version with
    # any revision is installed, and nothing matches 0.0.0-*: both outcomes are among the cases.
    assert apt_acts["dpkg=0.0.0-*"] and {apt_acts[w] for w in wildcards} == {True, False}, apt_acts
    assert {r: bool(apt_unmet([r], out["packages"])) for r in requests if r not in wildcards} == {
        r: acts for r, acts in apt_acts.items() if r not in wildcards
    }
    read = subprocess.run(
        ["sh", "-c", READ_APT_STATE.read_text(), "read-apt-state", *wildcards],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    state = apt_state(read.stdout.rstrip("\n"))  # as the command module returns it
    assert {r: bool(apt_unmet([r], state["packages"], state["pinned"])) for r in requests} == apt_acts
    # The read's packages are package_facts' packages, version for version.
    versions = {name: sorted(p["version"] for p in entries) for name, entries in state["packages"].items()}
    assert versions == {name: sorted(p["version"] for p in entries) for name, entries in out["packages"].items()}


def _python_apt() -> bool:
    return subprocess.run(["/usr/bin/python3", "-c", "import apt"], capture_output=True).returncode == 0
