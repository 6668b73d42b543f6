# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The driver branches, and their kernel-module flavours, that a vendor's package index offers: read from the index
itself, not from a list kept by hand.

The package families are the vendors' own names:
- ``ubuntu``: Canonical's server driver packages in the Ubuntu archive, ``nvidia-driver-<branch>-server`` (proprietary
  kernel modules) and ``nvidia-driver-<branch>-server-open`` (Canonical, "NVIDIA drivers installation", Ubuntu Server
  docs; packages.ubuntu.com).
- ``cuda-apt``: NVIDIA's CUDA repository for Debian, ``cuda-drivers-<branch>`` (proprietary) and ``nvidia-open-<branch>``
  (open; NVIDIA Fabric Manager user guide, "Installing Fabric Manager": ``apt-get install -V nvidia-open-<branch>``).
- ``dnf-module``: the streams of NVIDIA's ``nvidia-driver`` module in its CUDA repository for RHEL 8/9,
  ``<branch>-dkms`` (proprietary) and ``<branch>-open`` (NVIDIA driver installation guide, "Kernel Modules";
  yum-packaging-dkms-nvidia README), read from ``modules.yaml`` or from ``dnf module list nvidia-driver``.
- ``dnf-versions``: NVIDIA's CUDA repository for RHEL 10, without module streams: the versions of its ``cuda-drivers``
  (proprietary) and ``nvidia-open`` (open) packages (NVIDIA driver installation guide, "Kernel Modules" and "Switching
  between Driver Module Flavors", RHEL 10), read from ``dnf repoquery --qf '%{name} %{version}'`` (a line each).
"""

import json
import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: driver_branches
author: gpuready contributors
short_description: the driver branches and kernel-module flavours a vendor's package index offers
description:
  - >-
    Reads package names from a Debian C(Packages) index (its Package fields), the output of C(apt-cache pkgnames)
    (one name a line) or a JSON object whose keys are package names; or module streams from a C(modules.yaml)
    (the stream of each modulemd document named nvidia-driver), the output of C(dnf module list nvidia-driver), or
    C(name version) lines of C(dnf repoquery).
  - Returns each branch the family's packages or streams name, with its flavours (C(proprietary), C(open)).
  - C(driver_streams) returns the nvidia-driver streams of C(dnf module list) output, and which one is enabled.
  - C(versionlock_other_branches) returns the entries of dnf's version lock list that hold an NVIDIA driver package
    (a name with nvidia, or cuda-drivers) at a driver branch other than the one given.
  - >-
    C(driver_cuda) returns the CUDA version a node's driver supports, for the layers whose packages are built per
    CUDA version (DCGM per major, nvcc and NCCL per version): C(CUDA Version: X.Y) in the header nvidia-smi printed
    (its input; DCGM docs, "Install DCGM", read it so), else, before the driver answers (installed in this run, loaded
    after the reboot), the first version whose minimum driver the branch given reaches, by NVIDIA's CUDA Toolkit
    release notes, table "CUDA Toolkit and Corresponding Driver Versions". It returns C(version) (V(13.0), empty
    when neither says), C(major) (0 when none) and C(source) (V(nvidia-smi), V(driver branch 550-server), or empty).
options:
  _input:
    description: The index text.
    type: str
    required: true
  family:
    description: C(ubuntu), C(cuda-apt), C(dnf-module) or C(dnf-versions).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Say which branches apt offers
  ansible.builtin.debug:
    msg: "{{ names | gpuready.gpu.driver_branches('ubuntu') | list }}"
"""

RETURN = r"""
_value:
  description: Branch (a string of digits) to its sorted flavours, in branch order.
  type: dict
"""

FAMILIES = {
    "ubuntu": re.compile(r"^nvidia-driver-(?P<branch>\d+)-server(?P<open>-open)?$"),
    "cuda-apt": re.compile(r"^(?:cuda-drivers-(?P<branch>\d+)|nvidia-open-(?P<obranch>\d+))$"),
    "dnf-module": re.compile(r"^(?P<branch>\d+)-(?:dkms|(?P<open>open))$"),
    "dnf-versions": re.compile(r"^(?:cuda-drivers|(?P<open>nvidia-open)) (?:\d+:)?(?P<branch>\d+)\.\S*$"),
}
# An entry of dnf 4's versionlock.list as `dnf versionlock add` writes it: name-epoch:version-release.arch, the arch
# a glob (NVIDIA driver installation guide, "Version locking": "Adding versionlock on:
# kmod-nvidia-open-dkms-3:575.51-1.fc41.*"). The packages: NVIDIA's (a name with "nvidia") and cuda-drivers, the
# proprietary flavour's; a driver branch is a version's first field, three digits or more.
LOCK_ENTRY = re.compile(
    r"^(?P<name>(?!!)(?:\S*nvidia\S*|cuda-drivers))-(?P<epoch>\d+):(?P<branch>\d{3,})\.[^-]*-[^-]+\.[^.]+$"
)
DNF_LINE = re.compile(r"^nvidia-driver\s+(?P<stream>\S+)(?P<marks>(?:\s*\[[a-z]\])*)")


def _names(text):
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return list(json.loads(stripped))
    packages = re.findall(r"^Package:\s*(\S+)", text, flags=re.MULTILINE)
    return packages or [line.strip() for line in text.splitlines() if line.strip()]


def _streams(text):
    if re.search(r"^document:\s*modulemd\s*$", text, flags=re.MULTILINE):
        streams = []
        for document in re.split(r"^---\s*$", text, flags=re.MULTILINE):
            if re.search(r"^document:\s*modulemd\s*$", document, flags=re.MULTILINE) and re.search(
                r"^\s+name:\s*nvidia-driver\s*$", document, flags=re.MULTILINE
            ):
                streams += re.findall(r"^\s+stream:\s*['\"]?([^'\"\s]+)", document, flags=re.MULTILINE)
        return streams
    return [m.group("stream") for m in map(DNF_LINE.match, text.splitlines()) if m]


def driver_streams(text):
    """The nvidia-driver streams of `dnf module list` output, and the enabled one ('' when none)."""
    if not isinstance(text, str):
        raise AnsibleFilterError(f"driver_streams: needs dnf's output, not {type(text).__name__}")
    streams, enabled = [], ""
    for match in map(DNF_LINE.match, text.splitlines()):
        if match:
            streams.append(match.group("stream"))
            if "[e]" in match.group("marks"):
                enabled = match.group("stream")
    return {"streams": streams, "enabled": enabled}


def driver_branches(text, family):
    if not isinstance(text, str):
        raise AnsibleFilterError(f"driver_branches: needs the index text, not {type(text).__name__}")
    if family not in FAMILIES:
        raise AnsibleFilterError(f"driver_branches: family is one of {', '.join(FAMILIES)}, not {family!r}")
    pattern = FAMILIES[family]
    offered = {}
    for name in _streams(text) if family == "dnf-module" else _names(text):
        match = pattern.match(name)
        if not match:
            continue
        groups = match.groupdict()
        branch = groups.get("branch") or groups.get("obranch")
        flavour = "open" if (groups.get("open") or groups.get("obranch")) else "proprietary"
        offered.setdefault(branch, set()).add(flavour)
    return {b: sorted(offered[b]) for b in sorted(offered, key=int)}


def branch_offer(item):
    """One branch of driver_branches' answer (a dict2items item) as a message names it: "550" or "470 proprietary only"."""
    flavours = item["value"]
    return item["key"] if len(flavours) > 1 else f"{item['key']} {flavours[0]} only"


def versionlock_other_branches(entries, branch):
    """The lock entries that hold an NVIDIA package at another driver branch: what a change of branch releases. Other
    locks (the admin's, an exclusion's `!`, NVIDIA packages whose versions are not driver versions) stay."""
    if isinstance(entries, str):
        entries = entries.split()
    others = []
    for entry in entries:
        match = LOCK_ENTRY.match(entry)
        if match and match.group("branch") != str(branch):
            others.append(entry)
    return others


# NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions", Linux x86_64, the GA release of
# each version: 13.0 >= 580.65.06, 12.9 >= 575.51.03, 12.8 >= 570.26, 12.6 >= 560.28.03, 12.5 >= 555.42.02,
# 12.4 >= 550.54.14, 12.3 >= 545.23.06, 12.2 >= 535.54.03, 12.1 >= 530.30.02, 12.0 >= 525.60.13, 11.8 >= 520.61.05,
# 11.7 >= 515.43.04, 11.6 >= 510.39.01, 11.5 >= 495.29.05, 11.4 >= 470.42.01, 11.3 >= 465.19.01, 11.2 >= 460.27.03,
# 11.1 >= 455.23, 11.0 >= 450.36.06. A branch gets the newest version whose driver it reaches; highest first.
CUDA_BY_BRANCH = (
    (580, "13.0"),
    (575, "12.9"),
    (570, "12.8"),
    (560, "12.6"),
    (555, "12.5"),
    (550, "12.4"),
    (545, "12.3"),
    (535, "12.2"),
    (530, "12.1"),
    (525, "12.0"),
    (520, "11.8"),
    (515, "11.7"),
    (510, "11.6"),
    (495, "11.5"),
    (470, "11.4"),
    (465, "11.3"),
    (460, "11.2"),
    (455, "11.1"),
    (450, "11.0"),
)
SMI = re.compile(r"CUDA Version: (\d+)\.(\d+)")


def driver_cuda(nvidia_smi, branch):
    said = SMI.search(nvidia_smi or "")
    if said:
        return {"version": f"{said[1]}.{said[2]}", "major": int(said[1]), "source": "nvidia-smi"}
    number = re.match(r"\d+", str(branch or ""))
    for first, version in CUDA_BY_BRANCH:
        if number and int(number.group()) >= first:
            return {"version": version, "major": int(version.split(".")[0]), "source": f"driver branch {branch}"}
    return {"version": "", "major": 0, "source": ""}


class FilterModule:
    def filters(self):
        return {
            "driver_branches": driver_branches,
            "driver_streams": driver_streams,
            "branch_offer": branch_offer,
            "versionlock_other_branches": versionlock_other_branches,
            "driver_cuda": driver_cuda,
        }
