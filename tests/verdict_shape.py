"""What every command's verdict must look like in a pipe or CI log (80 columns), for the tests of each command."""

from __future__ import annotations

import re

from rich.cells import cell_len

WIDTH = 80
MAX_LINES = 40
#: Lines that hold a path, kept whole to be copied even when longer than the terminal.
PATH_LINES = ("inventory: ", "artifacts: ")


def assert_fits(stdout: str, width: int = WIDTH) -> list[str]:
    """At most 40 lines, none wider than ``width`` (but a path), none a lone word left by a wrapped column."""
    text = stdout.splitlines()
    assert len(text) <= MAX_LINES, stdout
    assert all(cell_len(line) <= width for line in text if not line.startswith(PATH_LINES)), stdout
    assert not [line for line in text if re.fullmatch(r"[│┃ ]*\S+[│┃ ]*", line)], stdout
    return text


def failing_lines(text: list[str]) -> dict[str, str]:
    """The failing and erroring checks' lines, by check id."""
    return {line.split()[1]: line for line in text if line.startswith(("✗ ", "! "))}
