"""One numbered artifact folder per run, so any run can be understood afterwards.

``<artifacts>/<NNNN>-<UTC time>-<command>/`` holds the command line, the variables
(secrets masked), the runner's events, ``summary.json``, ``junit.xml``, ``report.md``
and, when the run did not pass, a ``FAILURE`` marker.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from gpuready.core import redact
from gpuready.core.errors import BadInput

DEFAULT_ROOT = Path("gpuready-runs")


def artifacts_root(root: Path | str | None) -> Path:
    """The artifacts folder, made if missing; one :class:`BadInput` line when it cannot hold runs."""
    root = Path(root or os.environ.get("GPUREADY_ARTIFACTS") or DEFAULT_ROOT)
    try:
        root.mkdir(parents=True, exist_ok=True)
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
    numbers = [int(p.name.split("-", 1)[0]) for p in root.iterdir() if re.match(r"^\d{4}-", p.name)]
    seq = max(numbers, default=0) + 1
    while True:
        path = root / f"{seq:04d}-{stamp}-{slug}"
        try:
            path.mkdir()
            break
        except FileExistsError:  # another run took the number first
            seq += 1
        except OSError as e:
            raise BadInput(f"--artifacts {root}: cannot create a run folder: {e.strerror}") from None
    (path / "command.txt").write_text(redact.text(shlex.join(sys.argv)) + "\n")
    return path


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(redact.structure(data), indent=2, sort_keys=False, default=str) + "\n")
