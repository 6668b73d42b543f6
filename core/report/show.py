"""``gpuready report show [RUN]``: a finished run's verdict again, from its artifacts (for a person, or --json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuready.core.command import artifacts_option

if TYPE_CHECKING:
    from gpuready.core.results import RunResult


def load(folder: Path) -> RunResult:
    from gpuready.core.errors import BadInput
    from gpuready.core.results import RunResult

    summary = folder / "summary.json"
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
        run = RunResult.from_dict(data)
    except OSError as e:
        raise BadInput(f"{summary}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{summary}: not JSON ({e.msg} at line {e.lineno})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{summary}: not a gpuready summary ({e})") from None
    run.artifacts = str(folder)
    return run


@click.command("show")
@click.argument("run", required=False, metavar="[RUN]")
@click.option("--json", "as_json_flag", is_flag=True, help="Print the run's summary as JSON (for scripts).")
@click.option("-v", "--verbose", count=True, help="Every host's rows too.")
@artifacts_option
def show(run: str | None, as_json_flag: bool, verbose: int, artifacts: Path | None) -> None:
    """Print a finished run's verdict again, from its artifacts; exit as the run did (0 passed, 1 failed,
    3 error). RUN is a run folder, its number in the artifacts folder, or left out for the latest run.

    \b
      gpuready report show                      # the latest run in ./gpuready-runs
      gpuready report show 7 --json | jq .status
    """
    from gpuready.core import run_folders
    from gpuready.core.command import console, fail
    from gpuready.core.errors import GpureadyError
    from gpuready.core.report import terminal, writers

    try:
        found = load(run_folders.resolve(run, artifacts))
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    if as_json_flag:
        click.echo(writers.as_json(found))
    else:
        terminal.show(found, console(soft_wrap=False), verbose=bool(verbose))
        for name in ("report.html", "report.md"):
            if (Path(found.artifacts) / name).is_file():
                click.echo(f"{name}: {Path(found.artifacts) / name}")
    sys.exit(found.exit_code())
