"""The Debian components NVIDIA's packages need (contrib) reach every Debian archive a node reads, -security included.

Real parts: the recorded `apt-cache policy` and the deb822 sources of a Debian 12 node as Debian's official container
image ships it (tests/fixtures/apt/SOURCES.md), the role's reading of the sources (its raw command, run here), the
driver role's components task file run by Ansible on this machine, and apt itself (`apt-get indextargets`), asked
which indexes the node's sources and the written file together name.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.unit.provision.local_play import collection_filter, run_role_tasks

FIXTURES = ROOT / "tests" / "fixtures" / "apt"
POLICY = (FIXTURES / "debian12-apt-cache-policy.txt").read_text()
apt_sources_command = collection_filter("apt_sources_command", "apt_sources")
debian_missing_components = collection_filter("debian_missing_components", "apt_sources")

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt (Debian)")


def _etc(tmp_path: Path) -> Path:
    """/etc/apt of the recorded node: Debian's debian.sources only."""
    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    shutil.copy(FIXTURES / "debian12-debian.sources", etc / "sources.list.d" / "debian.sources")
    return etc


def _read(etc: Path) -> str:
    read = subprocess.run(["sh", "-c", apt_sources_command(str(etc))], capture_output=True, text=True, check=True)
    return read.stdout


def _index_targets(parts: Path, lists: Path) -> set[tuple[str, str, str]]:
    """(site, suite, component) of every Packages index apt would read from the sources in ``parts``."""
    lists.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            "apt-get",
            "indextargets",
            "--no-release-info",
            "-o",
            "Dir::Etc::SourceList=/dev/null",
            "-o",
            f"Dir::Etc::SourceParts={parts}",
            "-o",
            f"Dir::State::Lists={lists}",
            "--format",
            "$(SITE) $(RELEASE) $(COMPONENT) $(IDENTIFIER)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = (line.split() for line in done.stdout.splitlines())
    return {(site, suite, component) for site, suite, component, kind in rows if kind == "Packages"}


def test_every_debian_archive_of_the_node_lacking_contrib_is_named_at_its_own_uri(tmp_path: Path) -> None:
    sources = _read(_etc(tmp_path))
    assert debian_missing_components(POLICY, ["contrib"], sources) == [
        {"uri": "http://deb.debian.org/debian", "suites": ["bookworm", "bookworm-updates"], "components": ["contrib"]},
        {"uri": "http://deb.debian.org/debian-security", "suites": ["bookworm-security"], "components": ["contrib"]},
    ]
    assert debian_missing_components(POLICY, ["main"], sources) == []


def test_a_component_is_judged_by_the_sources_not_by_apts_list_of_indexes(tmp_path: Path) -> None:
    """apt-cache policy leaves out an empty index (bookworm-updates has no contrib packages), so the policy alone
    would ask for contrib there on every run: the sources say it is enabled."""
    etc = _etc(tmp_path)
    text = (etc / "sources.list.d" / "debian.sources").read_text()
    (etc / "sources.list.d" / "debian.sources").write_text(text.replace("Components: main", "Components: main contrib"))
    assert debian_missing_components(POLICY, ["contrib"], _read(etc)) == []


def test_before_the_first_update_the_release_suites_of_the_sources_stand_for_the_archives(tmp_path: Path) -> None:
    """A fresh root (or an image whose package lists were cleaned) has a policy that names no archive: the first run
    must name the same archives as the runs after `apt-get update`, or its file changes on the second run."""
    etc = _etc(tmp_path)
    (tmp_path / "lists").mkdir()
    empty = subprocess.run(
        ["apt-cache", "-o", f"Dir::State::Lists={tmp_path / 'lists'}", "-o", f"Dir::Etc={etc}", "policy"],
        capture_output=True,
        text=True,
        check=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    ).stdout
    assert "o=Debian" not in empty, empty
    sources = _read(etc)
    before = debian_missing_components(empty, ["contrib"], sources, "", "bookworm")
    assert before == debian_missing_components(POLICY, ["contrib"], sources, "", "bookworm")
    # No Debian source at all: the mirrors given.
    mirrors = [{"uri": "http://mirror.example/debian", "suites": ["bookworm"]}]
    assert debian_missing_components(empty, ["contrib"], "", "", "bookworm", mirrors) == [
        {"uri": "http://mirror.example/debian", "suites": ["bookworm"], "components": ["contrib"]}
    ]


def _run(tmp_path: Path, etc: Path) -> dict[str, Any]:
    role_vars = {
        "nvidia_driver_plan": {"components": ["contrib"]},
        "nvidia_driver_apt": {"policy": POLICY},
        "nvidia_driver_sources_read": {"stdout": _read(etc)},
        "nvidia_driver_files": {"stdout": ""},
        "nvidia_driver_components_sources": str(etc / "sources.list.d" / "gpuready-debian-components.sources"),
        "ansible_facts": {"distribution_release": "bookworm"},
    }
    stats, _ = run_role_tasks(tmp_path, "nvidia_driver", "components.yml", role_vars, "nvidia_driver_findings")
    return stats


def test_the_written_source_gives_contrib_to_the_release_updates_and_security_suites(tmp_path: Path) -> None:
    etc = _etc(tmp_path)
    written = etc / "sources.list.d" / "gpuready-debian-components.sources"
    assert _run(tmp_path, etc)["changed"] == 1
    node = _index_targets(etc / "sources.list.d", tmp_path / "lists")
    archives = {(site, suite) for site, suite, _ in node}
    assert archives == {
        ("http://deb.debian.org/debian", "bookworm"),
        ("http://deb.debian.org/debian", "bookworm-updates"),
        ("http://deb.debian.org/debian-security", "bookworm-security"),
    }
    lacking = sorted(archive for archive in archives if (*archive, "contrib") not in node)
    assert lacking == [], written.read_text()
    # The next run reads its own file among the sources and leaves it as it is: the content does not depend on it.
    first = written.read_text()
    assert _run(tmp_path, etc)["changed"] == 0
    assert written.read_text() == first
