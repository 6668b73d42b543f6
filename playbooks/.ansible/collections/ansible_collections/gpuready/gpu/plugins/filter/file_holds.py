# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Whether a file a role manages already is what the role would write, from one read of the role's files.

A role reads all of its files with one call (the file_read_command and file_states filters, or
ansible.builtin.find with checksums: the same list of dicts), then runs copy, get_url or
file only for those that differ: copy alone runs two modules on the node (stat, then file) even when
nothing changes. The judgement is the one those modules make without options beyond these: the same
kind (regular file, directory), the same content (SHA-1, as copy compares), mode, owner and group.
Anything else (a link, a missing file, a setting not compared here) is "does not hold": the module
then runs and decides.
"""

import hashlib

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: file_holds
author: gpuready contributors
short_description: whether a file found by ansible.builtin.find already holds the wanted state
description:
  - Looks up O(path) in the C(files) list that ansible.builtin.find returned (with O(ansible.builtin.find#module:get_checksum=true)
    for contents) and tells whether it is a regular file (or a directory with O(directory)) with the given
    content, mode, owner and group. An option left out is not compared.
options:
  _input:
    description: The C(files) list of an ansible.builtin.find result.
    type: list
    elements: dict
    required: true
  path:
    description: The file's absolute path.
    type: str
    required: true
  content:
    description: The content it must have (compared by SHA-1, as ansible.builtin.copy does).
    type: str
  mode:
    description: Its octal mode, e.g. V(0644).
    type: str
  owner:
    description: Its owner's name.
    type: str
  group:
    description: Its group's name.
    type: str
  directory:
    description: It must be a directory instead of a regular file.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Write the file only when it differs
  ansible.builtin.copy:
    dest: /etc/example.conf
    content: "{{ wanted }}"
    mode: "0644"
  when: not (found.files | gpuready.gpu.file_holds('/etc/example.conf', content=wanted, mode='0644'))
"""

RETURN = r"""
_value:
  description: True when the file exists and every given option holds.
  type: bool
"""


def _mode(value):
    try:
        return "%04o" % int(str(value), 8)
    except ValueError:
        raise AnsibleFilterError(f"file_holds: mode must be octal like '0644', not {value!r}")


def file_holds(files, path, content=None, mode=None, owner=None, group=None, directory=False):
    if not isinstance(files, list):
        raise AnsibleFilterError(f"file_holds: needs the files list of ansible.builtin.find, not {type(files).__name__}")
    mode = None if mode is None else _mode(mode)
    found = next((f for f in files if isinstance(f, dict) and f.get("path") == path), None)
    if found is None or found.get("islnk"):
        return False
    if not (found.get("isdir") if directory else found.get("isreg")):
        return False
    if content is not None and found.get("checksum") != hashlib.sha1(str(content).encode("utf-8")).hexdigest():
        return False
    if mode is not None and found.get("mode") != mode:
        return False
    if owner is not None and found.get("pw_name") != owner:
        return False
    return group is None or found.get("gr_name") == group


class FilterModule:
    def filters(self):
        return {"file_holds": file_holds}
