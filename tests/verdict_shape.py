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
    assert all(cell_len(line) <= width for line in text if not is_path(line)), stdout
    assert not [line for line in text if re.fullmatch(r"[│┃ ]*\S+[│┃ ]*", line) and not is_path(line)], stdout
    return text


def is_path(line: str) -> bool:
    """A line that names a path, kept whole to be copied: a labelled one, or a path too long to share a line (a
    whole token, not a column wrapped word by word)."""
    return line.startswith(PATH_LINES) or (len(line.split()) == 1 and "/" in line)


def failing_lines(text: list[str]) -> dict[str, str]:
    """The failing and erroring checks' lines, by check id."""
    return {line.split()[1]: line for line in text if line.startswith(("✗ ", "! "))}
