"""The Debian components NVIDIA's packages need (contrib) reach every Debian archive a node reads, -security included.

Real parts: the recorded `apt-cache policy` and the deb822 sources of a Debian 12 node as Debian's official container
image ships it (tests/fixtures/apt/SOURCES.md), the driver role's components task file run by Ansible on this machine,
and apt itself (`apt-get indextargets`), asked which indexes the node's sources and the written file together name.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit.provision.local_play import collection_filter, run_role_tasks

FIXTURES = ROOT / "tests" / "fixtures" / "apt"
POLICY = (FIXTURES / "debian12-apt-cache-policy.txt").read_text()
debian_missing_components = collection_filter("debian_missing_components", "apt_components")

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt (Debian)")


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


def test_every_debian_archive_of_the_node_lacking_contrib_is_named_at_its_own_uri() -> None:
    assert debian_missing_components(POLICY, ["contrib"]) == [
        {"uri": "http://deb.debian.org/debian-security", "suites": ["bookworm-security"], "components": ["contrib"]},
        {"uri": "http://deb.debian.org/debian", "suites": ["bookworm-updates", "bookworm"], "components": ["contrib"]},
    ]
    assert debian_missing_components(POLICY, ["main"]) == []


def test_the_written_source_gives_contrib_to_the_release_updates_and_security_suites(tmp_path: Path) -> None:
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    shutil.copy(FIXTURES / "debian12-debian.sources", parts / "debian.sources")
    written = parts / "gpuready-debian-components.sources"
    role_vars = {
        "nvidia_driver_plan": {"components": ["contrib"]},
        "nvidia_driver_apt": {"policy": POLICY},
        "nvidia_driver_files": {"stdout": ""},
        "nvidia_driver_components_sources": str(written),
    }
    stats, _ = run_role_tasks(tmp_path, "nvidia_driver", "components.yml", role_vars, "nvidia_driver_findings")
    assert stats["changed"] == 1, written.read_text() if written.exists() else stats
    node = _index_targets(parts, tmp_path / "lists")
    archives = {(site, suite) for site, suite, _ in node}
    assert archives == {
        ("http://deb.debian.org/debian", "bookworm"),
        ("http://deb.debian.org/debian", "bookworm-updates"),
        ("http://deb.debian.org/debian-security", "bookworm-security"),
    }
    lacking = sorted(archive for archive in archives if (*archive, "contrib") not in node)
    assert lacking == [], written.read_text()
