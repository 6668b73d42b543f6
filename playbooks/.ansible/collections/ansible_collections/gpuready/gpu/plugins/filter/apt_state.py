# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Parses what the nvidia_driver role's read-apt-state.sh printed: one command on the node in place of
package_facts (which loads apt's whole cache in Python, about a second), a separate apt-cache call and
apt's own run just to find a wildcard-pinned package already installed.
"""

import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: apt_state
author: gpuready contributors
short_description: the installed packages, apt's archives and pinned candidates from read-apt-state.sh
description:
  - Splits the output of the nvidia_driver role's C(read-apt-state.sh) into its sections.
  - C(packages) has the shape of the C(packages) fact of ansible.builtin.package_facts (name to a list of
    C(name), C(version), C(arch), C(source)). It holds the packages dpkg has a current version of (every
    status but not-installed and config-files, as python-apt's C(is_installed)).
  - C(policy) is the output of C(apt-cache policy) (the enabled archives).
  - C(pinned) maps each package name to apt's candidate with the request's version wildcard pinned at 1001.
  - C(offered) is the package names apt knows of the driver families' prefixes (C(apt-cache pkgnames)), one a line;
    empty where the output has no such section.
options:
  _input:
    description: The script's standard output.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Install only what apt would install
  ansible.builtin.apt:
    name: "{{ wanted }}"
  vars:
    state: "{{ read.stdout | gpuready.gpu.apt_state }}"
  when: wanted | gpuready.gpu.apt_unmet(state.packages, state.pinned) | length > 0
"""

RETURN = r"""
_value:
  description: C(packages), C(policy), C(pinned) and C(offered).
  type: dict
"""

SECTIONS = ("dpkg", "policy", "pinned")
NOT_CURRENT = ("n", "c")  # dpkg status letters without a current version: not-installed, config-files
CANDIDATE = re.compile(r"^(\S+):\n(?:[ \t]+Installed: \S+\n)?[ \t]+Candidate: (\S+)$", re.MULTILINE)


def _sections(text):
    # The command module strips the last newline: an empty last section ends at the end of the text.
    parts = re.split(r"^### (\w+)(?:\n|\Z)", text, flags=re.MULTILINE)
    found = dict(zip(parts[1::2], parts[2::2]))
    missing = [s for s in SECTIONS if s not in found]
    if missing:
        raise AnsibleFilterError(f"apt_state: the output has no {', '.join(missing)} section")
    return found


def apt_state(text):
    if not isinstance(text, str):
        raise AnsibleFilterError(f"apt_state: needs the script's output, not {type(text).__name__}")
    found = _sections(text)
    packages = {}
    for line in found["dpkg"].splitlines():
        fields = line.split("\t")
        if len(fields) != 4 or len(fields[0]) < 2 or fields[0][1] in NOT_CURRENT:
            continue
        _, name, version, arch = fields
        packages.setdefault(name, []).append({"name": name, "version": version, "arch": arch, "source": "apt"})
    pinned = dict(CANDIDATE.findall(found["pinned"]))
    offered = found.get("offered", "").strip()
    return {"packages": packages, "policy": found["policy"], "pinned": pinned, "offered": offered}


class FilterModule:
    def filters(self):
        return {"apt_state": apt_state}
