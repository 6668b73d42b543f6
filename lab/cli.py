"""``gpuready lab``: start, stop and list the local simulators."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuready.core.command import fail, folder_option
from gpuready.core.errors import GpureadyError

if TYPE_CHECKING:
    from gpuready.lab import Component, Lab


_lab_dir_option = folder_option("--lab-dir", "Lab folder [default: ./gpuready-lab, or $GPUREADY_LAB_DIR].")


def _names(components: str | None, default: list[str]) -> list[str]:
    names = [c.strip() for c in (components or "").split(",") if c.strip()]
    return names or default


@click.group()
def lab() -> None:
    """The lab of local simulators (plainly simulated): Kubernetes API, vCenter, GPU node hosts, Slurm."""


@lab.command("up")
@click.option("--components", required=True, metavar="LIST", help="Comma-separated: kubernetes, vsphere, nodes, slurm.")
@click.option("--set", "settings", multiple=True, metavar="NAME.KEY=VALUE", help="A component option.")
@_lab_dir_option
def up(components: str, settings: tuple[str, ...], lab_dir: Path | None) -> None:
    """Start lab components; prints how to use each one (on stderr) and its inventory path (on stdout, the last
    line the last one's)."""
    from gpuready.lab import Lab, component

    names = _names(components, [])
    if not names:
        from gpuready.lab import COMPONENTS

        fail(f"--components {components!r}: name at least one of {', '.join(COMPONENTS)}", 2)
    options: dict[str, dict[str, str]] = {n: {} for n in names}
    for item in settings:
        key, sep, value = item.partition("=")
        name, dot, option = key.partition(".")
        if not sep or not dot or not option:
            fail(f"--set {item!r}: expected NAME.KEY=VALUE", 2)
        if name not in options:
            fail(f"--set {item!r}: component {name!r} is not in --components", 2)
        options[name][option] = value
    the_lab = Lab(lab_dir)
    try:
        parts = [(n, component(n)) for n in names]
        for name, part in parts:
            if part.needs_root and os.geteuid() != 0:
                fail(f"lab component {name!r} needs root (network namespaces); run it as root", 2)
            part.check(options[name])
        state = the_lab.load_state()
        for name, part in parts:
            if name in state:
                click.echo(f"{name}: already up — {part.status(the_lab, state[name])}", err=True)
                click.echo(state[name].get("inventory", ""))
                continue
            stale = part.leftovers(the_lab)
            if stale:
                fail(
                    f"{name}: {len(stale)} process(es) of an earlier `lab up` still run (pids "
                    f"{', '.join(map(str, stale))}); stop them first: gpuready lab down --lab-dir {the_lab.root}",
                    3,
                )
            (the_lab.root / name / "pids").unlink(missing_ok=True)
            click.echo(f"{name}: starting ({part.description})", err=True)
            state[name] = _start(the_lab, name, part, options[name])
            the_lab.save_state(state)
            for line in part.usage(the_lab, state[name]):
                click.echo(f"  {line}", err=True)
            click.echo(state[name]["inventory"])
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        from gpuready.core import cancel

        fail(
            f"{cancel.reason()}; components started before are up ('gpuready lab down' stops them)", cancel.exit_code()
        )


def _start(the_lab: Lab, name: str, part: Component, options: dict[str, str]) -> dict[str, Any]:
    """Start one component; if that fails or is cancelled (Ctrl-C, SIGTERM), stop what it had started,
    so no half-started component is left that state.json does not know about."""
    from gpuready.core import cancel
    from gpuready.lab import stop_pids

    with cancel.handling_signals():
        try:
            return part.up(the_lab, options)
        except BaseException:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            stop_pids(the_lab.spawned.pop(name, []), grace=2)
            raise


@lab.command("build")
@click.option("--components", required=True, metavar="LIST", help="Comma-separated: kubernetes, vsphere.")
def build(components: str) -> None:
    """Build what lab components run from their Go modules (cached by version), without starting them."""
    from gpuready.lab import component

    try:
        for name in _names(components, []):
            for folder in component(name).build():
                click.echo(f"{name}: {folder}")
    except GpureadyError as e:
        fail(str(e), e.exit_code)


@lab.command("down")
@click.option("--components", default=None, metavar="LIST", help="Only these (default: all that are up).")
@_lab_dir_option
def down(components: str | None, lab_dir: Path | None) -> None:
    """Stop lab components and remove what they set up."""
    from gpuready.lab import Lab, component

    the_lab = Lab(lab_dir)
    try:
        state = the_lab.load_state()
        from gpuready.lab import COMPONENTS, stop_in_reverse

        leftover = [n for n in COMPONENTS if n not in state and component(n).leftovers(the_lab)]
        for name in _names(components, list(state) + leftover):
            if name not in state:
                pids = component(name).leftovers(the_lab) if name in COMPONENTS else []
                if pids:
                    stop_in_reverse(pids)
                    (the_lab.root / name / "pids").unlink(missing_ok=True)
                    click.echo(f"{name}: stopped {len(pids)} process(es) left by an unfinished `lab up`", err=True)
                else:
                    click.echo(f"{name}: not up", err=True)
                continue
            part = component(name)
            click.echo(f"{name}: stopping {part.stopping(the_lab, state[name])}", err=True)
            started = time.monotonic()
            part.down(the_lab, state[name])
            del state[name]
            the_lab.save_state(state)
            click.echo(f"{name}: stopped in {time.monotonic() - started:.1f}s", err=True)
    except GpureadyError as e:
        fail(str(e), e.exit_code)


@lab.command("status")
@_lab_dir_option
def status(lab_dir: Path | None) -> None:
    """One line per lab component that was started."""
    from gpuready.lab import Lab, component

    the_lab = Lab(lab_dir)
    try:
        state = the_lab.load_state()
        if not state:
            click.echo("lab: nothing is up")
        for name, item in state.items():
            click.echo(f"{name}: {component(name).status(the_lab, item)}")
    except GpureadyError as e:
        fail(str(e), e.exit_code)
