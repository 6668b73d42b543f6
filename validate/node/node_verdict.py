"""The node verdict: one node's catalogue result as one small, versioned JSON document.

``validate this-node`` writes it on the node; Slurm's health check, prolog and epilog, the sweep and the
Kubernetes side read it. Its fields are documented in docs/fleet.md ("The node verdict"); a reader refuses a
document of another schema instead of guessing what its fields mean. A change that removes or redefines a
field makes a new schema id (``/v2``); adding a field keeps ``/v1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput
from gpuready.core.results import CHECK_STATUSES, FAILED, Check, RunResult

SCHEMA = "gpuready.node-verdict/v1"
#: The keys every v1 document has; a reader checks them before it trusts the document.
REQUIRED = ("schema", "gpuready", "host", "time", "set", "status", "checks")
CHECK_KEYS = ("id", "status", "message", "remedy")


def build(result: RunResult, host: str, check_set: str, *, budget_seconds: float, seconds: float) -> dict[str, Any]:
    """The verdict of ``result`` (one node's checks)."""
    from gpuready.core import __version__

    failure = headline(result.checks)
    return {
        "schema": SCHEMA,
        "gpuready": __version__,
        "host": host,
        "time": result.finished or result.started,
        "set": check_set,
        "budget_seconds": budget_seconds,
        "seconds": round(seconds, 3),
        "status": result.status,
        "counts": result.counts(),
        # The first failed check in catalogue order: what a drain reason or a node condition names.
        "failure": None if failure is None else {k: getattr(failure, k) for k in ("id", "message", "remedy")},
        "checks": [dict(vars(c)) for c in result.checks],
    }


def headline(checks: list[Check]) -> Check | None:
    """The check a one-line state names: the first that failed (the catalogue's order puts root causes first,
    and what depends on a failed check is skipped). A check that could not run is never one: unknown is not
    failed."""
    return next((c for c in checks if c.status == FAILED), None)


def read(path: Path) -> dict[str, Any]:
    """A verdict file, checked: another schema, or a document that is not a verdict, is one line of bad input."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such node verdict file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read the node verdict: {getattr(e, 'strerror', None) or e}") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON (line {e.lineno}): not a gpuready node verdict") from None
    return parse(data, str(path))


def parse(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or "schema" not in data:
        raise BadInput(f"{where}: not a gpuready node verdict (no schema field; this gpuready reads {SCHEMA})")
    if data["schema"] != SCHEMA:
        made_by = f" (written by gpuready {data['gpuready']})" if isinstance(data.get("gpuready"), str) else ""
        raise BadInput(f"{where}: a node verdict of schema {data['schema']!r}{made_by}; this gpuready reads {SCHEMA}")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise BadInput(f"{where}: node verdict without {', '.join(missing)}")
    if not isinstance(data["checks"], list) or not all(
        isinstance(c, dict) and all(isinstance(c.get(k), str) for k in CHECK_KEYS) and c["status"] in CHECK_STATUSES
        for c in data["checks"]
    ):
        raise BadInput(f"{where}: node verdict with a malformed checks list (each needs {', '.join(CHECK_KEYS)})")
    return data


def checks(data: dict[str, Any]) -> list[Check]:
    """The checks of a parsed verdict, as the results model holds them."""
    return [
        Check(c["id"], data["host"], c["status"], c["message"], str(c.get("evidence", "")), c["remedy"])
        for c in data["checks"]
    ]
