# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The node's apt sources, read with one raw command (``apt_sources_command``), and the one among them that already
serves a repository gpuready would add (``apt_source_for``).

apt refuses every source when two entries for the same URI and suite name different keyrings ("Conflicting values
set for option Signed-By", sources.list(5): Signed-By must agree between entries of one repository). NVIDIA's own
setup writes such entries: the cuda-keyring package (/etc/apt/sources.list.d/cuda-<distro>-<arch>.list with
/usr/share/keyrings/cuda-archive-keyring.gpg) and the Container Toolkit guide's nvidia-container-toolkit.list (with
/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg). A role that finds the repository served already keeps that
entry, and its keyring, instead of adding its own.

``debian_missing_components`` names the Debian archives the node reads that lack a component NVIDIA's packages need.
Debian publishes a release in several archives at two URIs: the release and its ``-updates`` suite in
``http://deb.debian.org/debian``, security updates in ``-security`` at ``http://deb.debian.org/debian-security`` (Debian
wiki, "SourcesList": its bookworm example lists the three suites with the same components). The archives are those
``apt-cache policy`` says are Debian's (``o=Debian``); what each has enabled comes from the sources themselves, since
apt-cache policy leaves out a component whose index is empty (bookworm-updates' contrib).
"""

import re
import shlex

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: apt_sources
author: gpuready contributors
short_description: the apt source entry (and its keyring) that already serves a repository URI
description:
  - C(apt_sources_command) builds a sh command for ansible.builtin.raw that prints every file apt reads its sources
    from (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources), each after a C(### <path>) line.
  - C(apt_source_for) reads that output and returns the first enabled C(deb) entry, one-line (sources.list(5)
    C(deb [signed-by=...] URI suite)) or deb822 (C(Types), C(URIs), C(Signed-By)), whose URI is the given one, in
    any file but the role's own. apt's C($(ARCH)) in a URI is the node's Debian architecture.
  - C(debian_missing_components(wanted, sources, exclude, release)) reads C(apt-cache policy) output (C(LC_ALL=C),
    no package arguments) and returns, per URI of the archives it names C(o=Debian), the suites whose entries in
    C(sources) (that command's output, C(exclude) left out) lack some of the C(wanted) components, and which. Where
    the policy names no archive (no package lists yet), the entries of C(sources) whose suite is the C(release)
    codename or starts with it and a hyphen stand for the Debian archives; where there are none either, C(fallback)
    (a list of C(uri) and C(suites)).
options:
  _input:
    description: The command's standard output.
    type: str
    required: true
  uri:
    description: The repository URI the role would add.
    type: str
    required: true
  arch:
    description: The node's Debian architecture (amd64, arm64), for C($(ARCH)).
    type: str
  exclude:
    description: The role's own source file, which does not count.
    type: str
"""

EXAMPLES = r"""
- name: Read the node's apt sources
  ansible.builtin.raw: "{{ '/etc/apt' | gpuready.gpu.apt_sources_command }}"
  register: sources
  changed_when: false
  check_mode: false

- name: Add the repository only where no source serves it yet
  ansible.builtin.copy:
    dest: /etc/apt/sources.list.d/x.sources
    content: "..."
    mode: "0644"
  when: not (sources.stdout | gpuready.gpu.apt_source_for('https://example.invalid/repo/', 'amd64', '/etc/apt/sources.list.d/x.sources'))
"""

RETURN = r"""
_value:
  description: >-
    C(file) (where the entry is) and C(signed_by) (its keyring path, empty when it names none) of the entry that
    serves the URI; an empty dict when none does.
  type: dict
"""

SCRIPT = r"""LC_ALL=C
export LC_ALL
for f in "$1/sources.list" "$1"/sources.list.d/*.list "$1"/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  echo "### $f"
  cat -- "$f" 2>/dev/null
  echo
done
exit 0"""

ONE_LINE = re.compile(r"^deb\s+(?:\[(?P<options>[^\]]*)\]\s+)?(?P<uri>\S+)(?P<rest>(?:\s+\S+)*)")


def apt_sources_command(etc_apt="/etc/apt"):
    if not isinstance(etc_apt, str) or not etc_apt.startswith("/"):
        raise AnsibleFilterError(f"apt_sources_command: needs apt's absolute configuration folder, not {etc_apt!r}")
    return " ".join(["sh", "-c", shlex.quote(SCRIPT), "apt-sources", shlex.quote(etc_apt.rstrip("/") or "/")])


def _same(found, uri, arch):
    return found.replace("$(ARCH)", arch).rstrip("/") == uri.rstrip("/")


def _files(text):
    parts = re.split(r"^### (/\S+)$", text, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2]))


def _one_line_entries(body):
    """Each entry as (URI, keyring path, suites, components)."""
    for line in body.splitlines():
        match = ONE_LINE.match(line.split("#", 1)[0].strip())
        if not match:
            continue
        options = dict(item.split("=", 1) for item in (match.group("options") or "").split() if "=" in item)
        suite, *components = match.group("rest").split() or [""]
        yield match.group("uri"), options.get("signed-by", ""), [suite], components


def _deb822_entries(body):
    for stanza in re.split(r"\n\s*\n", body):
        fields = {}
        last = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and last:
                fields[last] += "\n" + line.strip()
                continue
            name, sep, value = line.partition(":")
            if sep:
                last = name.strip().lower()
                fields[last] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by", "")
        suites, components = fields.get("suites", "").split(), fields.get("components", "").split()
        for uri in fields.get("uris", "").split():
            # An inline key block is no file to reuse: the entry is named with an empty keyring path.
            yield uri, signed_by if "\n" not in signed_by else "", suites, components


def _entries(text, exclude=""):
    for path, body in _files(text):
        if path != exclude:
            for entry in _deb822_entries(body) if path.endswith(".sources") else _one_line_entries(body):
                yield path, entry


def apt_source_for(text, uri, arch="", exclude=""):
    if not isinstance(text, str):
        raise AnsibleFilterError(f"apt_source_for: needs the read's standard output, not {type(text).__name__}")
    if not isinstance(uri, str) or not uri:
        raise AnsibleFilterError("apt_source_for: needs the repository URI")
    for path, (found, signed_by, _, _) in _entries(text, exclude):
        if _same(found, uri, arch):
            return {"file": path, "signed_by": signed_by}
    return {}


# " 500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages" and its release line after it.
POLICY_ARCHIVE = re.compile(r"^\s*-?\d+\s+(?P<uri>\S+)\s+(?P<suite>\S+)/[^/\s]+\s+\S+\s+Packages\s*$")
POLICY_RELEASE = re.compile(r"^\s+release\s+(?P<fields>\S+)\s*$")


def _debian_archives(policy):
    """(URI, suite) of each archive whose release apt-cache policy names as o=Debian, in apt's order."""
    archives = []
    pending = None
    for line in policy.splitlines():
        match = POLICY_ARCHIVE.match(line)
        if match:
            pending = match
            continue
        release = POLICY_RELEASE.match(line)
        if pending and release:
            fields = dict(item.split("=", 1) for item in release.group("fields").split(",") if "=" in item)
            archive = (pending.group("uri").rstrip("/"), pending.group("suite"))
            if fields.get("o") == "Debian" and archive not in archives:
                archives.append(archive)
        pending = None
    return archives


def debian_missing_components(policy, wanted, sources, exclude="", release="", fallback=None):
    if not isinstance(policy, str) or not isinstance(sources, str):
        raise AnsibleFilterError("debian_missing_components: needs apt-cache policy's output and the sources read")
    if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
        raise AnsibleFilterError("debian_missing_components: wanted is a list of component names")
    enabled = {}
    for _, (uri, _, suites, components) in _entries(sources, exclude):
        for suite in suites:
            enabled.setdefault((uri.rstrip("/"), suite), set()).update(components)
    # Before the first `apt-get update` (a fresh root, an image whose lists were cleaned) the policy names no archive:
    # the release's own suites in the sources stand for them then, so the next run, with the lists, finds the same.
    archives = (
        _debian_archives(policy)
        or [archive for archive in enabled if release and archive[1].split("-")[0] == release]
        or [(item["uri"].rstrip("/"), suite) for item in fallback or [] for suite in item["suites"]]
    )
    by_uri = {}
    for uri, suite in sorted(set(archives)):  # one order, whichever way the archives were found
        lack = tuple(c for c in wanted if c not in enabled.get((uri, suite), set()))
        if lack:
            by_uri.setdefault((uri, lack), []).append(suite)
    return [{"uri": uri, "suites": suites, "components": list(lack)} for (uri, lack), suites in by_uri.items()]


class FilterModule:
    def filters(self):
        return {
            "apt_sources_command": apt_sources_command,
            "apt_source_for": apt_source_for,
            "debian_missing_components": debian_missing_components,
        }
