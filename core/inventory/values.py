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


def check_names(manager: Any, where: str) -> None:
    """Refuse host and group names with characters that are invisible or control the terminal: ``gpu01``
    with a right-to-left override or a zero-width space reads as another host in every report."""
    for kind, names in (("host", manager.hosts), ("group", manager.groups)):
        for name in names:
            found = unseen_character(name)
            if found:
                raise BadInput(
                    f"{where}: {kind} {name!r} has {found} in its name, a character that is invisible or "
                    "changes how text shows; use letters, digits, '-', '_' and '.'"
                )


def check_connection_vars(where: str, variables: Mapping[str, Any]) -> None:
    """Refuse an address that is not one string, and a port outside 1-65535 (values Ansible templates at run
    time, ``{{ ... }}``, are left to it)."""
    for key in HOST_VARS:
        value = variables.get(key)
        if value is not None and not isinstance(value, str):
            raise BadInput(f"{where}: {key} must be one host name or address, not a {_kind(value)} ({value!r})")
    for key in PORT_VARS:
        value = variables.get(key)
        if value is None or (isinstance(value, str) and "{{" in value):
            continue
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str) and value.strip().isdecimal() and value.strip().isascii():
            number = int(value.strip())
        if number is None or not PORT_RANGE[0] <= number <= PORT_RANGE[1]:
            raise BadInput(f"{where}: {key} {value!r} is not a TCP port ({PORT_RANGE[0]}-{PORT_RANGE[1]})")


def _kind(value: Any) -> str:
    # Ansible hands its own subclasses of list and dict (tagged with where they came from); name the YAML kind.
    for kind, name in ((bool, "boolean"), (int, "number"), (float, "number"), (list, "list"), (Mapping, "mapping")):
        if isinstance(value, kind):
            return name
    return type(value).__name__
