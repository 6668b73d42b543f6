#!/usr/bin/env python3
"""Cut a recorded `setup` result to the named cut of tests/fixtures/facts (SOURCES.md, "Named cut").

Reads the result of `ansible HOST -m ansible.builtin.setup` for one host, as JSON (`{"ansible_facts": {...},
"changed": false}`, what follows `HOST | SUCCESS => ` on ansible's console), and prints `{"ansible_facts": {...}}`
holding only the keys rhel-8.json and ubuntu-24.04.json keep, named without the `ansible_` prefix (as
ubuntu-24.04.json), with their values verbatim and in the order the source has them. Nothing else is changed or
added.

    scripts/cut_setup_facts.py /tmp/ubuntu-facts/jammy-setup.json > tests/fixtures/facts/ubuntu-22.04.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The kept keys, as rhel-8.json names them (ansible_distribution* is a prefix: all of them are kept).
KEPT = {
    "ansible_architecture",
    "ansible_kernel",
    "ansible_machine",
    "ansible_os_family",
    "ansible_pkg_mgr",
    "ansible_python_version",
    "ansible_selinux",
    "ansible_selinux_python_present",
    "ansible_service_mgr",
    "ansible_system",
    "ansible_userspace_architecture",
    "ansible_userspace_bits",
    "ansible_virtualization_role",
    "ansible_virtualization_type",
    "gather_subset",
    "module_setup",
}
KEPT_PREFIX = "ansible_distribution"


def cut(result: dict[str, Any]) -> dict[str, Any]:
    facts = result["ansible_facts"]
    kept = {k: v for k, v in facts.items() if k in KEPT or k.startswith(KEPT_PREFIX)}
    return {"ansible_facts": {k.removeprefix("ansible_"): v for k, v in kept.items()}}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} SETUP_RESULT.json", file=sys.stderr)
        return 2
    result = json.loads(Path(argv[1]).read_text())
    if result.get("failed") or result.get("unreachable"):
        print(f"{argv[1]}: setup did not succeed", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(cut(result), indent=4, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
