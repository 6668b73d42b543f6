"""Standard output and error that a reader who goes away cannot break.

`gpuready validate gpu-node ... | head -3` closes the pipe after three lines; a terminal that hangs up, or a
supervisor that started gpuready with a descriptor closed (`>&-`), does the same to every later write. The
verdict and the exit code are decided by the checks, never by whether someone was still reading: a write or
flush that fails (EPIPE, EIO, EBADF) is dropped, and the descriptor is pointed at /dev/null so that nothing
written later, by gpuready, the interpreter's last flush or a child process that inherited it, fails again.
That is what Python's own documentation advises for a reader that went away ("Note on SIGPIPE" in the
`signal` module: https://docs.python.org/3/library/signal.html#note-on-sigpipe).

A descriptor that is closed when gpuready starts is opened on /dev/null first: otherwise the next file
gpuready opens (a report being written) would get that number, and the verdict printed "to stdout" would land
in the report.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Any

#: Standard input, output and error: the descriptors a process expects to find open.
STANDARD = (0, 1, 2)


class Tolerant:
    """A stream whose writes and flushes never fail: after the first failure its descriptor is /dev/null.

    Everything else (``isatty``, ``encoding``, ``fileno``) is the wrapped stream's. ``buffer`` (the binary
    stream under a text one, which click writes to when the text stream's encoding is ASCII) is tolerant too.
    """

    def __init__(self, inner: Any, fd: int | None) -> None:
        self._inner = inner
        self._fd = fd
        #: True once a write failed: the reader is gone, and later output goes to /dev/null.
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def buffer(self) -> Tolerant:
        return Tolerant(self._inner.buffer, self._fd)

    def write(self, data: Any) -> int:
        try:
            return int(self._inner.write(data))
        except (OSError, ValueError):  # ValueError: the stream object itself was closed
            self._gone()
            return len(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except (OSError, ValueError):
            self._gone()

    def isatty(self) -> bool:
        try:
            return bool(self._inner.isatty())
        except (OSError, ValueError):
            return False

    def _gone(self) -> None:
        self.broken = True
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            if null != self._fd:
                os.dup2(null, self._fd)
                os.close(null)
        # What the text layer still buffers now drains into /dev/null.
        with contextlib.suppress(OSError, ValueError):
            self._inner.flush()


def _open_missing(fd: int) -> None:
    """Open /dev/null as ``fd`` when it is closed (it then is the lowest free number: it gets that number)."""
    try:
        os.fstat(fd)
    except OSError:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def _fd(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def guard() -> None:
    """Make this process's stdout and stderr tolerant (the program's entry point calls it, once)."""
    for fd in STANDARD:
        _open_missing(fd)
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if isinstance(stream, Tolerant):
            continue
        if stream is None:  # closed when the interpreter started: Python made no stream for it
            stream = open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        setattr(sys, name, Tolerant(stream, _fd(stream)))
