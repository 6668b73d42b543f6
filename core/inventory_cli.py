"""``gpuready inventory check``: the inventory and settings, checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import click

from gpuready.core.command import Context, common_options, execute
from gpuready.core.results import RunResult, passed


@click.group()
def inventory() -> None:
    """Work with gpuready inventories."""


@inventory.command("check")
@common_options
def check(inventory_path: Path, artifacts: Path | None, verbose: int) -> None:
    """Check an inventory: YAML, groups, gpuready settings against the schema, host variables.

    Any problem is one line naming the file and the key, exit 2.
    """
    execute(Context("inventory check", inventory_path, artifacts, verbose), _check)


def _check(ctx: Context) -> RunResult:
    inv = ctx.inventory
    result = ctx.new_result()
    where = str(inv.path)
    result.add(passed("inventory.yaml", where, "every YAML file parses"))
    groups = ", ".join(f"{g}: {len(h)}" for g, h in inv.groups.items()) or "no hosts"
    result.add(passed("inventory.groups", where, f"groups known ({groups})"))
    result.add(passed("settings.schema", where, f"{inv.settings_file.name} matches the settings schema"))
    for host in inv.hosts("gpu_nodes"):
        cls = inv.node_class(host)
        result.add(
            passed(
                "inventory.node_class",
                host,
                f"{inv.node_class_name(host)}: {cls.gpu_count} x {cls.gpu_model or 'no GPU'}",
            )
        )
    result.metrics = {"hosts": len(inv.host_groups), **{f"hosts_{g}": len(h) for g, h in inv.groups.items()}}
    return result
