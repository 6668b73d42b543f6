"""The small error hierarchy every library error is translated into, once, at the edge.

Library code raises these (chained with ``from e``); only the CLI turns them into a
one-line message and an exit code.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3

#: API bodies and tool output quoted in messages are cut to this length, so an error stays one line.
MESSAGE_LIMIT = 300


def shorten(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """One line, at most ``limit`` characters: for quoting API bodies and command output."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class GpureadyError(Exception):
    """Base of our errors; ``exit_code`` is what the CLI exits with."""

    exit_code = EXIT_UNREACHABLE

    def __str__(self) -> str:
        return shorten(super().__str__(), 1000)


class BadInput(GpureadyError):
    """The user gave us something wrong: inventory, settings, flags, a plan that cannot work."""

    exit_code = EXIT_BAD_INPUT


class Unreachable(GpureadyError):
    """Something could not be reached or run: a host, an API, a tool, credentials refused."""

    exit_code = EXIT_UNREACHABLE


class Cancelled(GpureadyError):
    """The user pressed Ctrl-C; what ran so far is still reported."""

    exit_code = 130

    def __init__(self, message: str, partial: object = None) -> None:
        super().__init__(message)
        #: What ran before the cancel (a PlaybookRun, a RunResult...), so it can still be reported.
        self.partial = partial
