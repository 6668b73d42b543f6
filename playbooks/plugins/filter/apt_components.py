# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The Debian archives a node reads (from ``apt-cache policy``) that lack a component NVIDIA's packages need.

Debian publishes each release in several archives, at two URIs: the release and its ``-updates`` suite in
``http://deb.debian.org/debian``, security updates in the ``-security`` suite of ``http://deb.debian.org/debian-security``
(Debian wiki, "SourcesList": the example for bookworm lists ``bookworm``, ``bookworm-updates`` and
``bookworm-security`` with the same components). A component enabled in some of them only gets no security
updates, or no point-release updates, for its packages. So every Debian archive the node already reads gets the
component, at the node's own URI (its mirror), not at a URI guessed for it.
"""

import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: debian_missing_components
author: gpuready contributors
short_description: the node's Debian archives that lack the wanted components
description:
  - Reads C(apt-cache policy) output (no package arguments, C(LC_ALL=C)) and returns, per URI of an archive whose
    release says C(o=Debian), the suites there that lack some of the wanted components and which ones they lack.
options:
  _input:
    description: The output of C(apt-cache policy).
    type: str
    required: true
  wanted:
    description: The components NVIDIA's packages need (C(contrib)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Say which Debian archives lack contrib
  ansible.builtin.debug:
    msg: "{{ policy | gpuready.gpu.debian_missing_components(['contrib']) }}"
"""

RETURN = r"""
_value:
  description: >-
    One item per URI and set of missing components, in the order apt lists them: C(uri), C(suites) (list) and
    C(components) (list, in the order of O(wanted)). Empty when every Debian archive has them.
  type: list
  elements: dict
"""

# " 500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages" and its release line after it.
ARCHIVE = re.compile(r"^\s*-?\d+\s+(?P<uri>\S+)\s+(?P<path>\S+)/(?P<component>[^/\s]+)\s+\S+\s+Packages\s*$")
RELEASE = re.compile(r"^\s+release\s+(?P<fields>\S+)\s*$")


def _archives(policy):
    found = {}
    pending = None
    for line in policy.splitlines():
        match = ARCHIVE.match(line)
        if match:
            pending = match
            continue
        release = RELEASE.match(line)
        if pending and release:
            fields = dict(item.split("=", 1) for item in release.group("fields").split(",") if "=" in item)
            if fields.get("o") == "Debian":
                suites = found.setdefault(pending.group("uri"), {})
                suites.setdefault(pending.group("path"), set()).add(pending.group("component"))
        pending = None
    return found


def debian_missing_components(policy, wanted):
    if not isinstance(policy, str):
        raise AnsibleFilterError(f"debian_missing_components: needs apt-cache policy's output, not {type(policy).__name__}")
    if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
        raise AnsibleFilterError("debian_missing_components: wanted is a list of component names")
    missing = []
    for uri, suites in _archives(policy).items():
        by_lack = {}
        for suite, components in suites.items():
            lack = tuple(c for c in wanted if c not in components)
            if lack:
                by_lack.setdefault(lack, []).append(suite)
        missing += [{"uri": uri, "suites": s, "components": list(lack)} for lack, s in by_lack.items()]
    return missing


class FilterModule:
    def filters(self):
        return {"debian_missing_components": debian_missing_components}
