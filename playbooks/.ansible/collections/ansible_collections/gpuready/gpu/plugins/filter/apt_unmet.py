# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Which apt package requests the installed packages do not already satisfy, without asking apt.

A no-change run then skips the apt call, which loads apt's whole cache just to find nothing to do.
The judgement is ansible.builtin.apt's own for state=present: ``name`` is met when the package is
installed, ``name=version`` when that exact version is installed. A version wildcard (``name=1.0-*``)
is met when the installed version matches it and apt's candidate with that version pinned at 1001
(the pin ansible.builtin.apt creates for such a request) is the installed version, or matches no
more: apt also installs a newer candidate that matches. Without that candidate (``pinned``), a
wildcard counts as unmet. Name wildcards, ``>=`` and an architecture suffix always do: apt decides.
"""

import fnmatch

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: apt_unmet
author: gpuready contributors
short_description: apt package requests that the installed packages do not satisfy
description:
  - Returns the items of a list of apt package requests (V(name) or V(name=version)) that the
    installed packages, as ansible.builtin.package_facts reports them, do not satisfy the way
    ansible.builtin.apt with O(ansible.builtin.apt#module:state=present) judges them.
  - A request with a version wildcard (V(name=1.0-*)) is met when the installed version matches it and
    O(pinned) names the installed version (or one that does not match) as apt's candidate for it.
  - Other requests with wildcards, V(>=) or an architecture suffix are always returned (apt decides).
options:
  _input:
    description: The package requests.
    type: list
    elements: string
    required: true
  packages:
    description: The C(packages) fact of ansible.builtin.package_facts.
    type: dict
    required: true
  pinned:
    description:
      - Per package name, apt's candidate version with the request's version wildcard pinned at 1001
        (C(pinned) of the P(gpuready.gpu.apt_state#filter) filter). Without it, wildcard requests are unmet.
    type: dict
"""

EXAMPLES = r"""
- name: Install only when something is missing
  ansible.builtin.apt:
    name: "{{ wanted }}"
  when: wanted | gpuready.gpu.apt_unmet(ansible_facts['packages']) | length > 0
"""

RETURN = r"""
_value:
  description: The requests that are not met, in their order.
  type: list
  elements: string
"""

WILDCARDS = ("*", "?", "[")
UNDECIDABLE = (*WILDCARDS, ">", "<", ":")


def _wildcard_met(installed, version, candidate):
    """ansible.builtin.apt's package_status for name=version: the installed version matches, and the best
    match under the 1001 pin is no other matching version."""
    if candidate is None:
        return False
    best = None if candidate in ("", "(none)") else candidate
    return any(
        fnmatch.fnmatch(v, version) and (best is None or best == v or not fnmatch.fnmatch(best, version))
        for v in installed
    )


def _met(request, packages, pinned):
    name, _, version = request.partition("=")
    installed = [p.get("version", "") for p in packages.get(name) or []]
    if any(c in name for c in UNDECIDABLE) or any(c in version for c in (">", "<", ":")) or version.startswith("="):
        return False
    if any(c in version for c in WILDCARDS):
        return _wildcard_met(installed, version, (pinned or {}).get(name))
    return bool(installed) and (not version or version in installed)


def apt_unmet(requests, packages, pinned=None):
    if not isinstance(packages, dict):
        raise AnsibleFilterError(f"apt_unmet: packages must be the packages fact, not {type(packages).__name__}")
    if pinned is not None and not isinstance(pinned, dict):
        raise AnsibleFilterError(f"apt_unmet: pinned must map package names to versions, not {type(pinned).__name__}")
    if isinstance(requests, str):
        requests = [requests]
    return [r for r in requests if not _met(str(r), packages, pinned)]


class FilterModule:
    def filters(self):
        return {"apt_unmet": apt_unmet}
