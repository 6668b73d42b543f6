"""The driver's version comes from the package that provides the kernel module, not from the branch's packages.

Canonical's archive (packages.ubuntu.com) has driver packages of older branches that are transitional:
they keep their own version number and depend on a newer branch's packages. Read on packages.ubuntu.com:
- noble `nvidia-dkms-535` 535.309.01-0ubuntu0.24.04.2, "NVIDIA DKMS package (transitional package)",
  amd64 depends on `nvidia-dkms-580`; `nvidia-dkms-580` is published at 580.159.03 (questing, resolute).
- jammy `nvidia-dkms-510-server` 515.105.01-0ubuntu0.22.04.1, "Transitional package for
  nvidia-dkms-515-server", whose amd64 dependency `nvidia-dkms-515-server` is "Transitional package for
  nvidia-dkms-535-server".
A node pinned to such a branch runs the newer branch's module; the pin cannot hold and must say so.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location(
    "nvidia_module_source", ROOT / "playbooks" / "plugins" / "modules" / "nvidia_module_source.py"
)
source = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(source)


def test_a_branch_whose_packages_pull_a_newer_branch_is_reported_in_one_line() -> None:
    holds, message = source.judge("535", "580.159.03", "nvidia-dkms-580", "580.159.03-0ubuntu0.25.10.1")
    assert holds is False
    assert "\n" not in message
    assert message.startswith("pinned driver branch 535 cannot hold: the kernel module is 580.159.03 (branch 580)")
    assert "provided by nvidia-dkms-580 580.159.03-0ubuntu0.25.10.1" in message


def test_the_module_of_the_pinned_branch_holds() -> None:
    holds, message = source.judge("550", "550.144.03", "nvidia-dkms-550-server", "550.144.03-0ubuntu0.24.04.1")
    assert holds is True
    assert message == (
        "kernel module 550.144.03 of branch 550, provided by nvidia-dkms-550-server 550.144.03-0ubuntu0.24.04.1"
    )


def test_no_module_yet_is_not_a_broken_pin() -> None:
    assert source.judge("550", "", "", "") == (True, "no nvidia kernel module for this kernel yet")


def test_modinfo_fields_are_read_by_name() -> None:
    # modinfo(8) prints `field:` then the value; kmod aligns values with spaces.
    text = (
        "filename:       /lib/modules/6.8.0-41-generic/updates/dkms/nvidia.ko.zst\n"
        "alias:          char-major-195-*\n"
        "version:        550.144.03\n"
        "license:        NVIDIA\n"
    )
    assert source.parse_modinfo(text) == ("/lib/modules/6.8.0-41-generic/updates/dkms/nvidia.ko.zst", "550.144.03")


class _Host:
    """What the module asks of AnsibleModule, answered by this machine's own programs."""

    def get_bin_path(self, name: str) -> str | None:
        return shutil.which(name)

    def run_command(self, args: list[str]) -> tuple[int, str, str]:
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (a Debian-family machine)")
def test_the_owner_comes_from_the_real_package_database() -> None:
    path = shutil.which("dpkg-query")
    real = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, check=True).stdout
    package = source.parse_dpkg_search(real)
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True).stdout
    assert package == "dpkg"
    assert source.owner(_Host(), path) == ("dpkg", version)
    assert source.owner(_Host(), "/usr/src/nvidia-0.0.0-not-installed") == ("", "")
