"""Inventory values gpuready refuses before anything runs: names that do not look like what they are, and
connection variables that only fail once a run has started."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from gpuready.core.errors import BadInput

#: Connection variables naming the address (Ansible's ssh connection plugin, option ``host``).
HOST_VARS = ("ansible_host", "ansible_ssh_host")
#: Connection variables naming the port (ssh connection plugin, option ``port``).
PORT_VARS = ("ansible_port", "ansible_ssh_port")
#: TCP ports are 16-bit (RFC 793); 0 is reserved and cannot be connected to.
PORT_RANGE = (1, 65535)


#: What to call characters Unicode gives no name, by category (ESC is U+001B, "a control character").
_UNNAMED = {"Cc": "a control character", "Co": "a private-use character", "Cn": "an unassigned code point"}


def unseen_character(name: str) -> str | None:
    """The first character of ``name`` that shows as something else or as nothing, described as
    ``U+202E (RIGHT-TO-LEFT OVERRIDE)``: control characters (ESC, NUL), format characters (bidirectional
    overrides, zero-width spaces and joiners), separators other than the space, unassigned code points."""
    if name.isprintable():  # the common case, at C speed: nothing to find
        return None
    for char in name:
        if not char.isprintable():
            unnamed = _UNNAMED.get(unicodedata.category(char), "a character without a name")
            return f"U+{ord(char):04X} ({unicodedata.name(char, unnamed)})"
    return None


#: The groups Ansible makes in every inventory ("Even if you do not define any groups in your inventory file,
#: Ansible creates two default groups: all and ungrouped",
#: https://docs.ansible.com/ansible/latest/inventory_guide/intro_inventory.html#default-groups): a host of that
#: name is shadowed by the group in every pattern (``--limit all`` would select every host).
RESERVED = ("all", "ungrouped")


def reserved_host(name: str, where: str) -> None:
    """Refuse a host named as one of Ansible's built-in groups (read from the YAML before Ansible parses it, which
    would only warn "Found both group and host with same name")."""
    if name in RESERVED:
        raise BadInput(f"{where}: host {name!r} has the name of Ansible's built-in group; rename the host")


def script(char: str) -> str | None:
    """The script of a letter as Unicode names it (``LATIN``, ``CYRILLIC``, ``GREEK``), None for what is not a
    letter (digits, '-', '.', '_' belong to every script)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    return unicodedata.name(char, "UNKNOWN").split()[0]


def mixed_scripts(name: str) -> list[str]:
    """The scripts of ``name``'s letters when there is more than one: ``gpu0l`` with a Cyrillic ``о`` reads as
    the Latin name and is another host (Unicode's mixed-script detection, UTS #39 section 5.1,
    https://www.unicode.org/reports/tr39/#Mixed_Script_Detection)."""
    if name.isascii():  # the common case: one script
        return []
    return sorted({s for s in map(script, name) if s})


def check_names(manager: Any, where: str) -> None:
    """Refuse host and group names with characters that are invisible or control the terminal: ``gpu01``
    with a right-to-left override or a zero-width space reads as another host in every report. Refuse host
    names that look like another (letters of two scripts), that ``--limit`` cannot select (Ansible splits a
    host pattern at commas and white space: ansible.inventory.manager.split_host_pattern). (The names of
    Ansible's own groups are refused before Ansible reads the file: :func:`reserved_host`.)"""
    for kind, names in (("host", manager.hosts), ("group", manager.groups)):
        for name in names:
            found = unseen_character(name)
            if found:
                raise BadInput(
                    f"{where}: {kind} {name!r} has {found} in its name, a character that is invisible or "
                    "changes how text shows; use letters, digits, '-', '_' and '.'"
                )
            if kind != "host":
                continue
            scripts = mixed_scripts(name)
            if len(scripts) > 1:
                raise BadInput(
                    f"{where}: host {name!r} mixes letters of several scripts ({', '.join(scripts)}): it reads as "
                    f"another name; write it in one script ({name.encode('ascii', 'backslashreplace').decode()})"
                )
            if any(c.isspace() or c == "," for c in name):
                raise BadInput(
                    f"{where}: host {name!r} has a space or a comma in its name: --limit can never select it "
                    "(Ansible splits host patterns there); use letters, digits, '-', '_' and '.'"
                )


#: Variables Ansible's ssh connection plugin reads as one string each (its options ``remote_user``,
#: ``private_key_file``, ``ssh_args``, ``ssh_common_args``, ``ssh_extra_args``): a list there is turned into
#: its Python text ("['-o', ...]") and handed to ssh, which fails only when the run connects.
STRING_VARS = (
    "ansible_user",
    "ansible_ssh_user",
    "ansible_become_user",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
)
#: The ssh arguments, split by the ssh connection plugin with shlex (``_split_ssh_args``): an unbalanced quote
#: is an error there, at run time.
SSH_ARG_VARS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args")


#: Connection plugins that reach ansible_host over the network (Ansible's default is ssh, "smart" its old alias).
NETWORK_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh")


def check_connection_vars(where: str, variables: Mapping[str, Any]) -> None:
    """Refuse what only fails once a run connects: an address that is not one host name or address (a list, a
    URL, one with a port in it), a port outside 1-65535, a user or key file that is not one string, ssh
    arguments that are not one string or that do not split (values Ansible templates at run time, ``{{ ... }}``,
    are left to it)."""
    import shlex

    # Only a connection over the network takes ansible_host as a host name or address: chroot's is the root's
    # path, a container connection's the container's name (Ansible's connection plugins' docs, "remote_addr").
    connection = str(variables.get("ansible_connection") or "ssh").rsplit(".", 1)[-1]
    for key in HOST_VARS if connection in NETWORK_CONNECTIONS else ():
        value = variables.get(key)
        if value is not None and not isinstance(value, str):
            raise BadInput(f"{where}: {key} must be one host name or address, not a {_kind(value)} ({value!r})")
        if isinstance(value, str) and "{{" not in value and (problem := address_problem(value)):
            raise BadInput(f"{where}: {key} {value!r} {problem}")
    for key in (*STRING_VARS, *SSH_ARG_VARS):
        value = variables.get(key)
        if (value is not None and not isinstance(value, str | int)) or isinstance(value, bool):
            raise BadInput(f"{where}: {key} must be one string, not a {_kind(value)} ({value!r})")
    for key in SSH_ARG_VARS:
        value = variables.get(key)
        if isinstance(value, str) and "{{" not in value:
            try:
                shlex.split(value)
            except ValueError as e:
                raise BadInput(
                    f"{where}: {key} {value!r}: ssh cannot be given it: {e} (a quote is not closed)"
                ) from None
    for key in PORT_VARS:
        value = variables.get(key)
        if value is None or (isinstance(value, str) and "{{" in value):
            continue
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str) and value.strip().isdecimal() and value.strip().isascii():
            number = int(value.strip())
        if number is None or not PORT_RANGE[0] <= number <= PORT_RANGE[1]:
            raise BadInput(f"{where}: {key} {value!r} is not a TCP port ({PORT_RANGE[0]}-{PORT_RANGE[1]})")


def address_problem(value: str) -> str | None:
    """What makes ``value`` something other than one host name or IP address, or None. ssh is handed the value
    whole, so ``10.0.0.5:2222`` is looked up as a host of that name, and so is ``https://vc.example.com``."""
    import re

    text = value.strip()
    if not text:
        return "is empty"
    if "://" in text:
        return "is a URL; give the host name or address alone (the port in ansible_port)"
    if any(c.isspace() for c in text) or "/" in text:
        return "is not a host name or address (it has a space or a '/')"
    # One colon: name:port. An IPv6 address has two or more; in brackets with a port it is [addr]:port.
    if re.fullmatch(r"[^:\[\]]+:\d*", text) or re.fullmatch(r"\[[^\]]*\]:\d*", text):
        return "has a port in it; give the port in ansible_port"
    return None


def _kind(value: Any) -> str:
    # Ansible hands its own subclasses of list and dict (tagged with where they came from); name the YAML kind.
    for kind, name in ((bool, "boolean"), (int, "number"), (float, "number"), (list, "list"), (Mapping, "mapping")):
        if isinstance(value, kind):
            return name
    return type(value).__name__
