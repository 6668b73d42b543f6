"""One numbered artifact folder per run, so any run can be understood afterwards.

``<artifacts>/<NNNN>-<UTC time>-<command>/`` holds the command line, the variables
(secrets masked), the runner's events, ``summary.json``, ``junit.xml``, ``report.md``
and, when the run did not pass, a ``FAILURE`` marker.

Artifacts are the user's alone (folders 0700, files 0600: node evidence, host names and inventory paths are not
for every local user), and each file is written whole or not at all (a temporary file, then a rename), so a full
disk leaves the previous version or nothing, never a truncated summary.json.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from gpuready.core import redact
from gpuready.core.errors import BadInput, Unreachable

DEFAULT_ROOT = Path("gpuready-runs")
FOLDER_MODE = 0o700
FILE_MODE = 0o600


class ArtifactNotWritten(Unreachable):
    """An artifact could not be written (full disk, quota, I/O error): exit 3, naming the file."""


def write_text(path: Path, text: str, *, mode: int | None = None, what: str = "") -> None:
    """Write ``path`` atomically, readable by the user only unless ``mode`` says otherwise: a temporary file in the
    same folder (0600, from mkstemp; its name never ends as ``path``'s does, so a reader that globs for the
    suffix never sees a half-written file), flushed to disk, then renamed over ``path``. On failure the temporary
    file is removed and :class:`ArtifactNotWritten` names ``path`` (after ``what`` it is, where given)."""
    import tempfile

    temporary = ""
    try:
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as e:
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise ArtifactNotWritten(f"could not write {what + ' ' if what else ''}{path}: {e.strerror or e}") from e


def make_private(folder: Path) -> None:
    """Folders 0700 and files 0600 under ``folder`` (what other writers, ansible-runner among them, made with
    their own modes)."""
    with contextlib.suppress(OSError):
        folder.chmod(FOLDER_MODE)
    for parent, folders, files in os.walk(folder):
        for names, mode in ((folders, FOLDER_MODE), (files, FILE_MODE)):
            for name in names:
                path = os.path.join(parent, name)
                if not os.path.islink(path):  # a link (the run's link to the collection) is not ours to change
                    with contextlib.suppress(OSError):
                        os.chmod(path, mode)


#: A run folder's name starts with its number: four digits at least, more past 9999 (``10000-...``).
NUMBERED = re.compile(r"^(\d{4,})-")


def run_number(name: str) -> int | None:
    """The run number a run folder's name starts with, or None for a folder that is not a run's."""
    found = NUMBERED.match(name)
    return int(found.group(1)) if found else None


def configured_root(root: Path | str | None) -> Path:
    """The artifacts folder: ``--artifacts``, else ``$GPUREADY_ARTIFACTS``, else ./gpuready-runs. A leading
    ``~`` is the home folder, as in the settings' paths: quoted (``GPUREADY_ARTIFACTS='~/runs'``, a systemd
    unit, a CI variable) no shell expanded it, and a folder literally named ``~`` would be made."""
    return Path(os.path.expanduser(str(root or os.environ.get("GPUREADY_ARTIFACTS") or DEFAULT_ROOT)))


def artifacts_root(root: Path | str | None) -> Path:
    """The artifacts folder, made if missing; one :class:`BadInput` line when it cannot hold runs."""
    root = configured_root(root)
    try:
        root.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    except FileExistsError:
        raise BadInput(f"--artifacts {root}: not a folder") from None
    except NotADirectoryError:
        raise BadInput(f"--artifacts {root}: a parent of it is a file, not a folder") from None
    except OSError as e:
        raise BadInput(f"--artifacts {root}: cannot create it: {e.strerror}") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise BadInput(f"--artifacts {root}: not writable")
    return root


def new_run_dir(root: Path | str | None, command: str) -> Path:
    root = artifacts_root(root)
    slug = re.sub(r"[^a-z0-9]+", "-", command.lower()).strip("-") or "run"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    numbers = [n for p in root.iterdir() if (n := run_number(p.name)) is not None]
    seq = max(numbers, default=0) + 1
    while True:
        path = root / f"{seq:04d}-{stamp}-{slug}"
        try:
            path.mkdir(mode=FOLDER_MODE)
            break
        except FileExistsError:  # another run took the number first
            seq += 1
        except OSError as e:
            if e.errno in FULL:
                raise ArtifactNotWritten(f"--artifacts {root}: cannot create a run folder: {e.strerror}") from None
            raise BadInput(f"--artifacts {root}: cannot create a run folder: {e.strerror}") from None
    try:
        write_text(path / "command.txt", redact.text(shlex.join(sys.argv)) + "\n")
    except ArtifactNotWritten:
        with contextlib.suppress(OSError):
            path.rmdir()  # an empty run folder would only say that a run once began here
        raise
    return path


#: Errors of a disk that cannot take more (full, over quota, failing): exit 3, not bad input.
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EIO)


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(redact.structure(data), indent=2, sort_keys=False, default=str) + "\n")
