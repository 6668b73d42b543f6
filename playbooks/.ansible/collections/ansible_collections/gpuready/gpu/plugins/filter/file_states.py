# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The files a role writes, read with one raw command on the node, in the shape of ansible.builtin.find's files.

``file_read_command`` builds the command (sh, GNU stat and sha1sum: no Python on the node, where a
find module call starts Python and compiles Ansible's module code first), ``file_states`` parses what
it printed into the dicts gpuready.gpu.file_holds reads (path, isreg, isdir, islnk, mode, pw_name,
gr_name, checksum), as find returns them with get_checksum (SHA-1) for the same files.
"""

import shlex

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: file_states
author: gpuready contributors
short_description: the output of the command of file_read_command as ansible.builtin.find's files
description:
  - One dict per path that exists (a link counts, and is not followed), with the keys
    gpuready.gpu.file_holds compares, as ansible.builtin.find returns them with O(ansible.builtin.find#module:get_checksum=true).
  - C(checksum) (SHA-1) only for a regular file that could be read.
  - The filter C(file_read_command) builds the command from a list of absolute paths; run it with
    ansible.builtin.raw and C(ansible_ssh_use_tty=false).
options:
  _input:
    description: The command's standard output.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read the files the role writes
  ansible.builtin.raw: "{{ ['/etc/apt/keyrings', '/etc/apt/sources.list.d/x.sources'] | gpuready.gpu.file_read_command }}"
  vars:
    ansible_ssh_use_tty: false
  register: read
  changed_when: false
  check_mode: false

- name: Write the source only when it differs
  ansible.builtin.copy:
    dest: /etc/apt/sources.list.d/x.sources
    content: "{{ wanted }}"
    mode: "0644"
  when: not (read.stdout | gpuready.gpu.file_states | gpuready.gpu.file_holds('/etc/apt/sources.list.d/x.sources', content=wanted, mode='0644'))
"""

RETURN = r"""
_value:
  description: A list of dicts, one per existing path.
  type: list
  elements: dict
"""

# stat's file type names are translated: the C locale keeps them the words parsed below. The path comes
# last on the line, so nothing in it can shift the other fields.
SCRIPT = r"""LC_ALL=C
export LC_ALL
for f in "$@"; do
  if [ -e "$f" ] || [ -L "$f" ]; then
    sum=-
    if [ -f "$f" ] && [ ! -L "$f" ]; then
      sum=$(sha1sum < "$f" 2>/dev/null) || sum=-
      sum=${sum%% *}
    fi
    stat --printf '%F\t%a\t%U\t%G' -- "$f" 2>/dev/null && printf '\t%s\t%s\n' "$sum" "$f"
  fi
done
exit 0"""

KINDS = {"regular file": "isreg", "regular empty file": "isreg", "directory": "isdir", "symbolic link": "islnk"}


def file_read_command(paths):
    if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") for p in paths):
        raise AnsibleFilterError(f"file_read_command: needs a list of absolute paths, not {paths!r}")
    return " ".join(["sh", "-c", shlex.quote(SCRIPT), "file-read", *(shlex.quote(p) for p in paths)])


def file_states(text):
    if not isinstance(text, str):
        raise AnsibleFilterError(f"file_states: needs the read's standard output, not {type(text).__name__}")
    files = []
    for line in text.splitlines():
        fields = line.split("\t", 5)
        if len(fields) != 6:
            continue
        kind, mode, owner, group, checksum, path = fields
        try:
            mode = "%04o" % int(mode, 8)
        except ValueError:
            continue
        entry = {key: KINDS.get(kind) == key for key in ("isreg", "isdir", "islnk")}
        entry.update(path=path, mode=mode, pw_name=owner, gr_name=group)
        if checksum != "-":
            entry["checksum"] = checksum
        files.append(entry)
    return files


class FilterModule:
    def filters(self):
        return {"file_read_command": file_read_command, "file_states": file_states}
