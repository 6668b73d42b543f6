"""The branches a vendor's index offers, read from real indexes: Ubuntu's archive as recorded, and `dnf module list`
of NVIDIA's CUDA repositories as posted in public issue threads (tests/fixtures/apt/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.provision.local_play import collection_filter

driver_branches = collection_filter("driver_branches", "driver_index")
driver_streams = collection_filter("driver_streams", "driver_index")
versionlock_other_branches = collection_filter("versionlock_other_branches", "driver_index")
FIXTURES = Path(__file__).parents[2] / "fixtures" / "apt"
ARCHIVE = json.loads((FIXTURES / "ubuntu-archive-nvidia.json").read_text())


def test_ubuntus_archive_offers_the_current_branches_and_580_with_both_flavours() -> None:
    jammy = driver_branches(json.dumps(ARCHIVE["jammy"]), "ubuntu")
    assert jammy["580"] == ["open", "proprietary"]
    assert jammy["590"] == ["open", "proprietary"]
    # Canonical's -server builds of old branches had no open flavour (open modules start at 515; 535 is the first).
    assert jammy["470"] == ["proprietary"]
    assert list(jammy) == sorted(jammy, key=int)


def test_a_branch_the_archive_lacks_for_a_release_is_not_offered() -> None:
    """noble never had the 418 server driver: the planning refusal of 418 on Ubuntu 24.04 rests on this."""
    assert "418" in driver_branches(json.dumps(ARCHIVE["jammy"]), "ubuntu")
    assert "418" not in driver_branches(json.dumps(ARCHIVE["noble"]), "ubuntu")


def test_the_same_names_read_from_apt_cache_pkgnames_or_a_packages_index() -> None:
    names = sorted(ARCHIVE["noble"])
    from_json = driver_branches(json.dumps(ARCHIVE["noble"]), "ubuntu")
    assert driver_branches("\n".join(names) + "\n", "ubuntu") == from_json
    packages = "".join(f"Package: {n}\nVersion: 1\n\n" for n in names)
    assert driver_branches(packages, "ubuntu") == from_json


def test_dnf_module_list_of_the_rhel9_repository_names_branch_streams_by_flavour() -> None:
    listing = (FIXTURES / "dnf-module-list-rhel9-cut.txt").read_text()
    # 515-dkms (proprietary) and 515-open; the precompiled 520 stream is no DKMS flavour gpuready installs.
    assert driver_branches(listing, "dnf-module") == {"515": ["open", "proprietary"]}
    assert driver_streams(listing) == {
        "streams": ["latest", "latest-dkms", "open-dkms", "515", "515-dkms", "515-open", "520"],
        "enabled": "",
    }


def test_the_enabled_stream_is_the_one_marked_e() -> None:
    listing = (FIXTURES / "dnf-module-list-rhel8-latest-enabled.txt").read_text()
    assert driver_streams(listing) == {"streams": ["latest", "latest-dkms", "open-dkms"], "enabled": "latest"}
    assert driver_branches(listing, "dnf-module") == {}


def test_a_modules_yaml_document_gives_its_streams() -> None:
    """modules.yaml as libmodulemd writes it (document: modulemd, data: name, stream); no real NVIDIA copy was
    obtainable here (scripts/record-driver-index records one), so this only checks the reading of the layout."""
    text = (
        '---\ndocument: modulemd\nversion: 2\ndata:\n  name: nvidia-driver\n  stream: "580-open"\n'
        "---\ndocument: modulemd\nversion: 2\ndata:\n  name: nvidia-driver\n  stream: 580-dkms\n"
        "---\ndocument: modulemd\nversion: 2\ndata:\n  name: other\n  stream: 590-open\n"
        "---\ndocument: modulemd-defaults\nversion: 1\ndata:\n  module: nvidia-driver\n  stream: 595-open\n"
    )
    assert driver_branches(text, "dnf-module") == {"580": ["open", "proprietary"]}


def test_the_rhel10_repository_offers_the_branches_of_its_package_versions() -> None:
    """`dnf repoquery --qf '%{name} %{version}' nvidia-open cuda-drivers` as dnf 4 prints it, a line a package version.
    No repoquery of NVIDIA's rhel10 repository is recorded; the versions are real ones (nvidia-open-3:580.65.06-1.el10
    in rocky-linux/rockylinux.org#201; 580.126.20 and 595.58.03 as Ubuntu's archive lists them), so this checks the
    reading of the layout and which name is which flavour."""
    text = "cuda-drivers 580.65.06\nnvidia-open 580.65.06\nnvidia-open 580.126.20\ncuda-drivers 595.58.03\n\n"
    assert driver_branches(text, "dnf-versions") == {"580": ["open", "proprietary"], "595": ["proprietary"]}
    # Other names and lines (a warning dnf prints on stdout) say nothing of the branches.
    noise = "nvidia-driver 610.43.02\nLast metadata expiration check: 0:01:02 ago\n"
    assert driver_branches(noise, "dnf-versions") == {}


#: `dnf versionlock add` of NVIDIA's guide, "Version locking", DNF 4 (`dnf4 versionlock \*nvidia\*575\*`): the entries
#: it reports adding, as versionlock.list holds them.
NVIDIA_575_LOCKS = [
    "kmod-nvidia-open-dkms-3:575.51-1.fc41.*",
    "nvidia-kmod-common-3:575.51-1.fc41.*",
    "nvidia-driver-cuda-libs-3:575.51-1.fc41.*",
    "nvidia-open-3:575.51-1.fc41.*",
    "nvidia-xconfig-3:575.51-1.fc41.*",
    "xorg-x11-nvidia-3:575.51-1.fc41.*",
    "kmod-nvidia-latest-dkms-3:575.51-1.fc41.*",
    "libnvidia-cfg-3:575.51-1.fc41.*",
]


def test_a_change_of_branch_releases_only_the_holds_of_the_other_branch() -> None:
    admins = [
        "nvidia-container-toolkit-0:1.17.8-1.*",  # an NVIDIA package whose version is no driver branch
        "!nvidia-open-3:575.51-1.fc41.*",  # an exclusion the admin made
        "bash-0:5.2.26-4.el10.*",
    ]
    assert versionlock_other_branches(NVIDIA_575_LOCKS + admins, "575") == []
    assert versionlock_other_branches(NVIDIA_575_LOCKS + admins, "580") == NVIDIA_575_LOCKS
    # The proprietary flavour's meta package, held by its own spec, goes with its branch.
    held = "cuda-drivers-0:575.51-1.fc41.*"
    assert versionlock_other_branches([held, "cuda-drivers-0:580.65.06-1.el10.*"], "580") == [held]
    # `dnf versionlock list` output, one entry a line, reads the same.
    assert versionlock_other_branches("\n".join(NVIDIA_575_LOCKS + admins) + "\n", 580) == NVIDIA_575_LOCKS


def test_an_unknown_family_is_a_clear_error() -> None:
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="family is one of ubuntu, cuda-apt, dnf-module"):
        driver_branches("", "yum")
