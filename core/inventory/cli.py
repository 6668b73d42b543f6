"""``gpuready inventory check``: the inventory and settings, checked before anything runs; ``gpuready inventory
init``: the example inventories, written out to start from."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuready.core.command import Context, common_options, execute, fail
from gpuready.core.errors import GpureadyError
from gpuready.core.results import Check, RunResult, passed
from gpuready.core.verdict import Verdict

if TYPE_CHECKING:
    from gpuready.core.inventory import Inventory


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


@inventory.command("init")
@click.argument("folder", type=click.Path(path_type=Path), default="inventories")
@click.option("--only", metavar="NAME[,NAME]", help="Only these examples (local, baremetal-c4140, ...).")
def init(folder: Path, only: str | None) -> None:
    """Write gpuready's example inventories into FOLDER/<name> (default ./inventories): local (this machine),
    baremetal-c4140, openshift-311 and vsphere-r750xa. Prints each inventory's path; one already there is kept as
    it is, never overwritten."""
    from gpuready.core.inventory import examples

    chosen = [n.strip() for n in (only or "").split(",") if n.strip()] or None
    try:
        written, kept = examples.write(folder, chosen)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    every = sorted(written + kept)
    for path in every:
        click.echo(path)
    if kept:
        verb = "is" if len(kept) == 1 else "are"
        click.echo(
            f"{', '.join(map(str, kept))} {verb} already there: kept as {'it is' if len(kept) == 1 else 'they are'}",
            err=True,
        )
    first = next((p for p in every if p.name == "local"), every[0])
    click.echo(f"next: gpuready inventory check -i {first}", err=True)


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
        if cls.gpu_count:
            result.add(_driver_branch(inv, host))
    result.metrics = {"hosts": len(inv.host_groups), **{f"hosts_{g}": len(h) for g, h in inv.groups.items()}}
    return result


def _driver_branch(inv: Inventory, host: str) -> Check:
    """What the driver role's plan would refuse, said before anything runs: a branch NVIDIA has retired, unless
    the host accepts one (GPUs that newer branches dropped)."""
    from ansible.module_utils.parsing.convert_bool import boolean

    from gpuready.core.role_defaults import role_default

    oldest = int(role_default("nvidia_driver", "nvidia_driver_oldest_supported_branch"))
    hostvars = inv.host_vars(host)
    pinned = hostvars.get("nvidia_driver_branch")
    branch = str(pinned) if pinned is not None and "{{" not in str(pinned) else inv.settings.driver.branch
    number = int(branch.split("-")[0])
    accepted = boolean(hostvars.get("nvidia_driver_allow_end_of_life", False), strict=False)
    v = Verdict(
        "inventory.driver_branch",
        host,
        f"pin {oldest} or newer (driver.branch in {inv.settings_file.name}), or set nvidia_driver_allow_end_of_life: "
        "true for hosts whose GPUs need a retired branch (Kepler: 470)",
    )
    if number >= oldest:
        return v.passed(f"driver branch {branch} is supported (the oldest NVIDIA supports: {oldest})")
    if accepted:
        return v.passed(f"driver branch {branch}, past its end of life, accepted (nvidia_driver_allow_end_of_life)")
    return v.failed(
        f"driver branch {branch} has reached its end of life: the oldest NVIDIA supports is {oldest}, "
        "and provisioning refuses it"
    )
