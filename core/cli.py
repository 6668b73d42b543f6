"""The ``gpuready`` command line. Only this layer prints and chooses exit codes."""

from __future__ import annotations

from typing import NoReturn

import click

from gpuready.core import __version__
from gpuready.core.lazy import LazyGroup

COMMANDS = {
    "inventory": ("gpuready.core.inventory_cli:inventory", "Check an inventory and gpuready's settings in it."),
    "provision": ("gpuready.provision.cli:provision", "Provision GPU nodes, clusters and vSphere with Ansible."),
    "lab": ("gpuready.lab.cli:lab", "Start and stop the lab of local simulators."),
    "report": ("gpuready.workloads.cli:report", "Show a finished run's verdict again; compare training runs."),
    "slurm": ("gpuready.validate.slurm_cli:slurm", "Run the node checks as Slurm's health check, prolog or epilog."),
    "validate": ("gpuready.validate.cli:validate", "Validate GPU nodes, clusters, vSphere and training performance."),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuready")
def cli() -> None:
    """gpuready: turn bare GPU servers into proven GPU infrastructure.

    Provision them with Ansible, validate nodes, clusters and vSphere, and prove them with a
    CheXNet training run. Exit codes: 0 all passed, 1 a check failed, 2 bad input or usage,
    3 could not reach or run, 130 cancelled.
    """


def main() -> None:
    """Entry point: click's usage errors become one line and exit 2, like every other bad input."""
    import sys

    try:
        cli.main(prog_name="gpuready", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else e.format_message())
        sys.exit(2)
    except click.UsageError as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
        click.echo(f"gpuready: error: {e.format_message()}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        click.echo(f"gpuready: error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("gpuready: error: cancelled", err=True)
        sys.exit(130)


def entry() -> NoReturn:
    """The ``gpuready`` program: :func:`main`, then an exit without the interpreter tearing down every module it
    loaded. With Ansible's inventory and pydantic loaded, that teardown costs about 0.1 CPU-s on every command;
    the exit handlers (logging, Ansible's temporary folder) still run. :func:`main` itself exits as usual, so
    it can be called in a process that goes on (tests do)."""
    import sys

    try:
        main()
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    leave(code)


def leave(code: int) -> NoReturn:
    """Flush what is written, run the exit handlers, and exit with ``code`` at once."""
    import atexit
    import contextlib
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that went away (`| head`): nothing more can reach it
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    entry()
