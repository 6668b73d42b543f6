"""Keep secrets out of logs, artifacts and reports.

Two nets: keys whose names say they hold a secret are masked wherever they appear in a
structure, and secret *values* registered at runtime (a password read from the
environment, say) are masked wherever they appear in text.
"""

from __future__ import annotations

import functools
import re
from typing import Any

MASK = "********"
# Whole words of a snake/kebab-case key, so "passed" or "tokenizer" are not taken for secrets.
_SECRET_KEY = re.compile(
    r"(^|[_\-.])(pass|password|passwd|passphrase|secret|token|api_?key|private_?key|credentials?|"
    r"client_?key|vault_?password)($|[_\-.])",
    re.I,
)
_registered: set[str] = set()


@functools.lru_cache(maxsize=4096)  # the same few keys repeat in every host's row of a 10,000-host report
def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def register(value: str | None) -> None:
    """Remember a secret value so :func:`text` masks it wherever it shows up."""
    if value and len(value) >= 4:
        _registered.add(value)


def register_environment(environ: dict[str, str] | None = None) -> None:
    """Treat the values of secret-named environment variables (passwords, tokens) as secrets."""
    import os

    for key, value in (os.environ if environ is None else environ).items():
        if is_secret_key(key):
            register(value)


def text(value: str) -> str:
    if not _registered:
        return value
    for secret in sorted(_registered, key=len, reverse=True):
        value = value.replace(secret, MASK)
    return value


def structure(value: Any) -> Any:
    """A copy of ``value`` with secret-named keys masked and registered secrets removed from strings."""
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and is_secret_key(k) and v not in (None, "") else structure(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [structure(v) for v in value]
    if isinstance(value, str):
        return text(value)
    return value
