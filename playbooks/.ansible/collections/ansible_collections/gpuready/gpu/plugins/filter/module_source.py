# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Which package provides the NVIDIA kernel module a kernel would load, and its version: read on the node
with one raw command (``module_source_command``), judged against the pinned branch here (``module_source``).

The version of a driver's meta or utility package does not say which driver runs. Several of Ubuntu's
packages of an older branch are transitional packages that keep their own version number but depend on a
newer branch's packages (packages.ubuntu.com, jammy ``nvidia-dkms-510-server`` "Transitional package for
nvidia-dkms-515-server", itself transitional for ``nvidia-dkms-535-server``; noble ``nvidia-dkms-535``
"NVIDIA DKMS package (transitional package)" depending on ``nvidia-dkms-580``). The module's own version
and its package do say it.
"""

import shlex

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: module_source
author: gpuready contributors
short_description: the package that provides the nvidia kernel module, judged against the pinned branch
description:
  - C(module_source_command) builds a sh command for ansible.builtin.raw (no Python on the node). It asks
    C(modinfo) for the C(nvidia) module of a kernel release (the running kernel when empty), then the
    package manager (C(dpkg-query -S), or C(rpm -qf)) for the package that owns the module's file. A module
    built by DKMS is owned by no package; then the owner of its DKMS source folder C(/usr/src/nvidia-<version>)
    is asked. With C(loaded=true) it first reads the loaded module's version (C(<sysfs>/module/nvidia/version))
    and whether nouveau is loaded (C(<sysfs>/module/nouveau)), in the same command. Run it with
    C(ansible_ssh_use_tty=false).
  - C(module_source) reads what the command printed and says whether the module's branch (its version's
    first number) is the pinned branch.
options:
  _input:
    description: The command's standard output.
    type: str
    required: true
  branch:
    description: The pinned driver branch (its number, e.g. V(550)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read which package provides the kernel module
  ansible.builtin.raw: "{{ ansible_facts['kernel'] | gpuready.gpu.module_source_command }}"
  vars:
    ansible_ssh_use_tty: false
  register: read
  changed_when: false
  check_mode: false

- name: Say whether the pin holds
  ansible.builtin.debug:
    msg: "{{ (read.stdout | gpuready.gpu.module_source('550')).message }}"
"""

RETURN = r"""
_value:
  description: >-
    C(found) (the kernel has an nvidia module), C(file), C(version) (modinfo's), C(package) and
    C(package_version) (empty when no package owns the module or its DKMS source), C(branch) (of the
    module's version), C(pin_holds) (true when no module is found), C(message) (one line), C(loaded) (the
    loaded module's version, empty when none is loaded or it was not read), C(nouveau) (nouveau is loaded) and
    C(modinfo) (false when the node has no C(modinfo), from kmod: then nothing is found and the message says
    so instead of "no module").
  type: dict
"""

# modinfo lives in /sbin or /usr/sbin, which a non-root PATH may lack (AnsibleModule.get_bin_path looks
# there too). dpkg-query -S prints "pkg[:arch][, pkg2]: PATH": the first package owns the file.
SCRIPT = r"""LC_ALL=C
export LC_ALL
PATH=$PATH:/sbin:/usr/sbin:/usr/local/sbin
owner() {
  if command -v dpkg-query >/dev/null 2>&1; then
    said=$(dpkg-query -S "$1" 2>/dev/null) || return 0
    line=$(printf '%s\n' "$said" | head -n 1)
    case $line in *": "*) ;; *) return 0 ;; esac
    owners=${line%: *}
    package=${owners%%,*}
    package=${package%%:*}
    package=$(echo $package)
    [ -n "$package" ] || return 0
    version=$(dpkg-query -W -f '${Version}' "$package" 2>/dev/null) || version=
    echo "$package $version"
  elif command -v rpm >/dev/null 2>&1; then
    said=$(rpm -qf --qf '%{NAME} %{VERSION}-%{RELEASE}\n' "$1" 2>/dev/null) || return 0
    printf '%s\n' "$said" | head -n 1
  fi
}
echo '### modinfo'
said=
if command -v modinfo >/dev/null 2>&1; then
  if [ -n "$1" ]; then said=$(modinfo -k "$1" nvidia 2>/dev/null); else said=$(modinfo nvidia 2>/dev/null); fi || said=
else
  echo 'modinfo-missing'
fi
printf '%s\n' "$said"
file=$(printf '%s\n' "$said" | sed -n 's/^filename:[[:space:]]*//p' | head -n 1)
version=$(printf '%s\n' "$said" | sed -n 's/^version:[[:space:]]*//p' | head -n 1)
echo '### owner'
if [ -n "$file" ]; then
  found=$(owner "$file")
  if [ -z "$found" ] && [ -n "$version" ]; then found=$(owner "/usr/src/nvidia-$version"); fi
  printf '%s\n' "$found"
fi
exit 0"""


# What the kernel has loaded (sysfs(5): /sys/module/<name> exists for a loaded module, and its version
# file holds the version a module declares). Printed before the modinfo section, which parsing ignores.
LOADED = """echo '### loaded'
cat {sysfs}/module/nvidia/version 2>/dev/null
echo '### nouveau'
if [ -e {sysfs}/module/nouveau ]; then echo loaded; fi
"""


def module_source_command(kernel_release="", loaded=False, sysfs="/sys"):
    if not isinstance(kernel_release, str):
        raise AnsibleFilterError(f"module_source_command: needs a kernel release, not {kernel_release!r}")
    script = (LOADED.format(sysfs=shlex.quote(sysfs)) if loaded else "") + SCRIPT
    return " ".join(["sh", "-c", shlex.quote(script), "module-source", shlex.quote(kernel_release)])


def parse_modinfo(text):
    """The (file, version) of `modinfo` output: lines `field:  value`."""
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in ("filename", "version") and name.strip() not in fields:
            fields[name.strip()] = value.strip()
    return fields.get("filename", ""), fields.get("version", "")


def judge(branch, version, package, package_version):
    """(pin holds, one line) for a module of `version` provided by `package` against the pinned `branch`."""
    if not version:
        return True, "no nvidia kernel module for this kernel yet"
    provider = "%s %s" % (package, package_version) if package else "no package (built outside the package manager)"
    module_branch = version.split(".")[0]
    if module_branch == str(branch):
        return True, "kernel module %s of branch %s, provided by %s" % (version, branch, provider)
    return False, (
        "pinned driver branch %s cannot hold: the kernel module is %s (branch %s), provided by %s; the branch's "
        "packages are transitional to a newer branch: pin branch %s or one the distribution still builds"
        % (branch, version, module_branch, provider, module_branch)
    )


def module_source(text, branch):
    if not isinstance(text, str):
        raise AnsibleFilterError(f"module_source: needs the read's standard output, not {type(text).__name__}")
    if "### modinfo" not in text or "### owner" not in text:
        raise AnsibleFilterError("module_source: the output has no modinfo and owner sections")
    before, _, rest = text.partition("### modinfo")
    loaded, _, nouveau = before.partition("### loaded")[2].partition("### nouveau")
    modinfo, _, owner = rest.partition("### owner")
    file, version = parse_modinfo(modinfo)
    package, _, package_version = (owner.strip().splitlines() or [""])[0].partition(" ")
    package_version = package_version.strip()
    has_modinfo = "modinfo-missing" not in modinfo.split()
    holds, message = judge(branch, version, package, package_version)
    if not has_modinfo:
        # Not "no module": the node cannot say. The loaded module is not judged against the pin: before
        # the reboot that loads a new branch, the old one is still loaded.
        message = (
            "modinfo is not installed (package kmod): which kernel module and package the driver uses was not read"
            + (f"; loaded: nvidia {loaded.strip()}" if loaded.strip() else "")
        )
    return {
        "found": bool(version),
        "file": file,
        "version": version,
        "package": package,
        "package_version": package_version,
        "branch": version.split(".")[0] if version else "",
        "pin_holds": holds,
        "message": message,
        "loaded": loaded.strip(),
        "nouveau": nouveau.strip() == "loaded",
        "modinfo": has_modinfo,
    }


class FilterModule:
    def filters(self):
        return {"module_source_command": module_source_command, "module_source": module_source}
