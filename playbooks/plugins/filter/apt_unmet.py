# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Which apt package requests the installed packages do not already satisfy, without asking apt.

A no-change run then skips the apt call, which loads apt's whole cache just to find nothing to do.
The judgement is ansible.builtin.apt's own for state=present, only where the installed packages
decide it alone: ``name`` is met when the package is installed, ``name=version`` when that exact
version is installed. A version wildcard (``name=1.0-*``) counts as unmet: apt also installs a newer
candidate that matches it, which only apt's cache knows. So do name wildcards, ``>=`` and an
architecture suffix: apt decides.
"""

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: apt_unmet
author: gpuready contributors
short_description: apt package requests that the installed packages do not satisfy
description:
  - Returns the items of a list of apt package requests (V(name) or V(name=version)) that the
    installed packages, as ansible.builtin.package_facts reports them, do not satisfy the way
    ansible.builtin.apt with O(ansible.builtin.apt#module:state=present) judges them.
  - Requests with wildcards, V(>=) or an architecture suffix are always returned (apt decides).
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

UNDECIDABLE = ("*", "?", "[", ">", "<", ":")


def _met(request, packages):
    name, _, version = request.partition("=")
    if any(c in request for c in UNDECIDABLE) or version.startswith("="):
        return False
    installed = [p.get("version", "") for p in packages.get(name) or []]
    return bool(installed) and (not version or version in installed)


def apt_unmet(requests, packages):
    if not isinstance(packages, dict):
        raise AnsibleFilterError(f"apt_unmet: packages must be the packages fact, not {type(packages).__name__}")
    if isinstance(requests, str):
        requests = [requests]
    return [r for r in requests if not _met(str(r), packages)]


class FilterModule:
    def filters(self):
        return {"apt_unmet": apt_unmet}
