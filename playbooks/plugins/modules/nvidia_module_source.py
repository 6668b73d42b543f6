#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_module_source
short_description: Read which package provides the NVIDIA kernel module a kernel would load, and its version
description:
  - Asks C(modinfo) for the C(nvidia) module of a kernel release (its file and version), then the package
    manager (C(dpkg-query -S) or C(rpm -qf)) for the package that owns that file. A module built by DKMS
    is owned by no package; then the owner of its DKMS source folder C(/usr/src/nvidia-<version>) is asked.
  - The version of a driver's meta or utility package does not say which driver runs. Several of Ubuntu's
    packages of an older branch are transitional packages that keep their own version number but depend on
    a newer branch's packages (packages.ubuntu.com, jammy C(nvidia-dkms-510-server) "Transitional package
    for nvidia-dkms-515-server", itself transitional for C(nvidia-dkms-535-server); noble C(nvidia-dkms-535)
    "NVIDIA DKMS package (transitional package)" depending on C(nvidia-dkms-580)). The module's own
    version and its package do say it.
  - Reports whether the module's branch (the version's first number) is the pinned branch.
  - Reads only; changes nothing. Supports check mode.
options:
  branch: {description: The pinned driver branch (its number, e.g. C(550))., type: str, required: true}
  kernel_release:
    description: Kernel release whose module is read (C(modinfo -k)); empty means the running kernel.
    type: str
    default: ""
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
author: gpuready
"""

EXAMPLES = r"""
- name: Driver | Read which package provides the kernel module
  gpuready.gpu.nvidia_module_source:
    branch: "550"
    kernel_release: "{{ ansible_facts['kernel'] }}"
  register: source
"""

RETURN = r"""
found: {description: Whether the kernel has an C(nvidia) module., returned: always, type: bool}
file: {description: The module file modinfo names., returned: always, type: str}
version: {description: The module's version (modinfo's C(version) field)., returned: always, type: str}
package: {description: The package that provides the module (or its DKMS source); empty when none owns it., returned: always, type: str}
package_version: {description: That package's version., returned: always, type: str}
branch: {description: The branch of the module's version., returned: always, type: str}
pin_holds: {description: Whether the module's branch is the pinned branch (true when no module is found)., returned: always, type: bool}
message: {description: One line saying what provides the module and whether the pin holds., returned: always, type: str}
"""

from ansible.module_utils.basic import AnsibleModule


def parse_modinfo(text):
    """The (file, version) of `modinfo` output: lines `field:  value`."""
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in ("filename", "version") and name.strip() not in fields:
            fields[name.strip()] = value.strip()
    return fields.get("filename", ""), fields.get("version", "")


def parse_dpkg_search(text):
    """The package of `dpkg-query -S PATH` output, `pkg[:arch][, pkg2]: PATH`; the first one owns it."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    owners = line.rpartition(": ")[0]
    return owners.split(",")[0].strip().split(":")[0] if owners else ""


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


def owner(module, path):
    """(package, version) owning `path`, or ("", "")."""
    dpkg = module.get_bin_path("dpkg-query")
    if dpkg:
        rc, out, _ = module.run_command([dpkg, "-S", path])
        package = parse_dpkg_search(out) if rc == 0 else ""
        if not package:
            return "", ""
        rc, out, _ = module.run_command([dpkg, "-W", "-f", "${Version}", package])
        return package, out.strip() if rc == 0 else ""
    rpm = module.get_bin_path("rpm")
    if rpm:
        rc, out, _ = module.run_command([rpm, "-qf", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\n", path])
        if rc == 0 and out.strip():
            name, _, version = out.strip().splitlines()[0].partition(" ")
            return name, version
    return "", ""


def main():
    module = AnsibleModule(
        argument_spec=dict(branch=dict(type="str", required=True), kernel_release=dict(type="str", default="")),
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, found=False, file="", version="", package="", package_version="", branch="")
    modinfo = module.get_bin_path("modinfo")
    file, version = "", ""
    if modinfo:
        command = [modinfo] + (["-k", p["kernel_release"]] if p["kernel_release"] else []) + ["nvidia"]
        rc, out, _ = module.run_command(command)
        if rc == 0:
            file, version = parse_modinfo(out)
    package, package_version = owner(module, file) if file else ("", "")
    if file and not package and version:
        package, package_version = owner(module, "/usr/src/nvidia-%s" % version)
    holds, message = judge(p["branch"], version, package, package_version)
    result.update(found=bool(version), file=file, version=version, package=package,
                  package_version=package_version, branch=version.split(".")[0] if version else "",
                  pin_holds=holds, message=message)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
