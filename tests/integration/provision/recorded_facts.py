"""The recorded Ansible facts of tests/fixtures/facts, and Ansible's own fact cache made from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

FACTS = ROOT / "tests" / "fixtures" / "facts"


def facts(record: str, edit: dict[str, Any] | None) -> dict[str, Any]:
    """A recording's facts by their short names (`setup` output names them `ansible_*`, the older files do not),
    with one named edit applied."""
    recorded = json.loads((FACTS / f"{record}.json").read_text())["ansible_facts"]
    return {k.removeprefix("ansible_"): v for k, v in recorded.items()} | (edit or {})


def fact_cache(folder: Path, hosts: dict[str, tuple[str, dict[str, Any] | None]]) -> Path:
    """Ansible's own jsonfile cache (host -> recording and edit), written through its plugin so the format is the
    installed Ansible's; plays that gather facts the smart way then read these instead."""
    from ansible.plugins.loader import cache_loader

    cache = cache_loader.get("jsonfile", _uri=str(folder), _timeout=0)
    for host, (record, edit) in hosts.items():
        found = facts(record, edit)
        cache.set(host, {f"ansible_{k}": v for k, v in found.items()} | {"_ansible_facts_gathered": True})
    return folder
