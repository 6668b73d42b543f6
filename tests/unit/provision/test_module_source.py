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

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.provision.local_play import collection_filter

module_source = collection_filter("module_source")
module_source_command = collection_filter("module_source_command", "module_source")
judge = collection_filter("judge", "module_source")
parse_modinfo = collection_filter("parse_modinfo", "module_source")


def test_a_branch_whose_packages_pull_a_newer_branch_is_reported_in_one_line() -> None:
    holds, message = judge("535", "580.159.03", "nvidia-dkms-580", "580.159.03-0ubuntu0.25.10.1")
    assert holds is False
    assert "\n" not in message
    assert message.startswith("pinned driver branch 535 cannot hold: the kernel module is 580.159.03 (branch 580)")
    assert "provided by nvidia-dkms-580 580.159.03-0ubuntu0.25.10.1" in message


def test_the_module_of_the_pinned_branch_holds() -> None:
    holds, message = judge("550", "550.144.03", "nvidia-dkms-550-server", "550.144.03-0ubuntu0.24.04.1")
    assert holds is True
    assert message == (
        "kernel module 550.144.03 of branch 550, provided by nvidia-dkms-550-server 550.144.03-0ubuntu0.24.04.1"
    )


def test_no_module_yet_is_not_a_broken_pin() -> None:
    assert judge("550", "", "", "") == (True, "no nvidia kernel module for this kernel yet")


def test_modinfo_fields_are_read_by_name() -> None:
    # modinfo(8) prints `field:` then the value; kmod aligns values with spaces.
    text = (
        "filename:       /lib/modules/6.8.0-41-generic/updates/dkms/nvidia.ko.zst\n"
        "alias:          char-major-195-*\n"
        "version:        550.144.03\n"
        "license:        NVIDIA\n"
    )
    assert parse_modinfo(text) == ("/lib/modules/6.8.0-41-generic/updates/dkms/nvidia.ko.zst", "550.144.03")


def _read(tmp_path: Path, modinfo: str | None, kernel: str = "", **options: object) -> tuple[str, str]:
    """Run the node's read here, with `modinfo` a script that prints `modinfo` (none when None), and
    this machine's own dpkg; return its output and the arguments modinfo was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "modinfo-args"
    if modinfo is not None:
        script = bin_dir / "modinfo"
        script.write_text(f"#!/bin/sh\necho \"$@\" > {asked}\ncat <<'EOF'\n{modinfo}EOF\n")
        script.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["sh", "-c", module_source_command(kernel, **options)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": path},
    )
    return done.stdout, asked.read_text().strip() if asked.exists() else ""


def _modinfo(filename: str, version: str) -> str:
    return f"filename:       {filename}\nalias:          char-major-195-*\nversion:        {version}\nlicense: NVIDIA\n"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (a Debian-family machine)")
def test_the_owner_comes_from_the_real_package_database(tmp_path: Path) -> None:
    """The module file is a file dpkg owns (dpkg-query itself): the read names that package and its version."""
    path = shutil.which("dpkg-query")
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True).stdout
    out, asked = _read(tmp_path, _modinfo(path, "550.144.03"), kernel="6.1.0-18-amd64")
    assert asked == "-k 6.1.0-18-amd64 nvidia"
    found = module_source(out, "550")
    assert (found["file"], found["version"], found["branch"]) == (path, "550.144.03", "550")
    assert (found["package"], found["package_version"]) == ("dpkg", version)
    assert found["found"] and found["pin_holds"]
    assert found["message"] == f"kernel module 550.144.03 of branch 550, provided by dpkg {version}"
    assert not module_source(out, "535")["pin_holds"]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (a Debian-family machine)")
def test_a_module_no_package_owns_is_said_so(tmp_path: Path) -> None:
    """A DKMS build outside the package manager: neither the file nor /usr/src/nvidia-<version> is owned."""
    out, _ = _read(tmp_path, _modinfo("/lib/modules/6.1.0-18-amd64/updates/dkms/nvidia.ko", "550.0.0-not-here"))
    found = module_source(out, "550")
    assert (found["package"], found["package_version"]) == ("", "")
    assert found["message"].endswith("provided by no package (built outside the package manager)")


def test_no_modinfo_or_no_module_is_no_module(tmp_path: Path) -> None:
    out, asked = _read(tmp_path, "")
    assert asked == "nvidia"
    assert module_source(out, "550") == {
        "found": False,
        "file": "",
        "version": "",
        "package": "",
        "package_version": "",
        "branch": "",
        "pin_holds": True,
        "message": "no nvidia kernel module for this kernel yet",
        "loaded": "",
        "nouveau": False,
        "modinfo": True,
    }


def test_the_loaded_modules_are_read_in_the_same_command(tmp_path: Path) -> None:
    """sysfs(5): /sys/module/<name> exists while a module is loaded; nvidia's version file holds its version."""
    sysfs = tmp_path / "sys"
    (sysfs / "module" / "nvidia").mkdir(parents=True)
    (sysfs / "module" / "nvidia" / "version").write_text("550.144.03\n")
    (sysfs / "module" / "nouveau").mkdir()
    out, _ = _read(tmp_path, _modinfo("/lib/modules/x/nvidia.ko", "550.163.01"), loaded=True, sysfs=str(sysfs))
    found = module_source(out, "550")
    assert (found["loaded"], found["nouveau"]) == ("550.144.03", True)
    assert (found["version"], found["file"]) == ("550.163.01", "/lib/modules/x/nvidia.ko")  # modinfo is still read


def test_nothing_loaded_reads_as_nothing_loaded(tmp_path: Path) -> None:
    (tmp_path / "sys" / "module").mkdir(parents=True)
    out, _ = _read(tmp_path, "", loaded=True, sysfs=str(tmp_path / "sys"))
    found = module_source(out, "550")
    assert (found["loaded"], found["nouveau"], found["found"]) == ("", False, False)


def test_this_machines_own_sysfs_agrees(tmp_path: Path) -> None:
    """The kernel's /sys here, which nobody here wrote: the read says what the files say."""
    version = Path("/sys/module/nvidia/version")
    out, _ = _read(tmp_path, "", loaded=True)
    found = module_source(out, "550")
    assert found["loaded"] == (version.read_text().strip() if version.exists() else "")
    assert found["nouveau"] == Path("/sys/module/nouveau").exists()


def test_the_loaded_modules_are_not_read_unless_asked(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    (sysfs / "module" / "nouveau").mkdir(parents=True)
    out, _ = _read(tmp_path, "", sysfs=str(sysfs))
    assert "### loaded" not in out
    assert module_source(out, "550")["nouveau"] is False


def test_a_node_without_modinfo_says_so_instead_of_no_module() -> None:
    """kmod's modinfo can be missing where the driver runs (a minimal VM image): the read cannot tell."""
    out = "### loaded\n580.159.04\n### nouveau\n### modinfo\nmodinfo-missing\n\n### owner\n"
    found = module_source(out, "550")
    assert (found["modinfo"], found["found"], found["pin_holds"]) == (False, False, True)
    assert found["message"] == (
        "modinfo is not installed (package kmod): which kernel module and package the driver uses was not read"
        "; loaded: nvidia 580.159.04"
    )


def test_whether_modinfo_is_there_is_this_machines_answer(tmp_path: Path) -> None:
    """No stand-in: the script looks where the node's shell would (PATH and the sbin folders)."""
    out, _ = _read(tmp_path, None)
    sbin = os.pathsep.join([os.environ["PATH"], "/sbin", "/usr/sbin", "/usr/local/sbin"])
    assert module_source(out, "550")["modinfo"] == (shutil.which("modinfo", path=sbin) is not None)
