"""Bulk work over thousands of hosts without the cycle collector's repeated passes over the heap."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused for a bounded step that builds many objects and few cycles (loading an
    inventory, writing the results files). At 10,000 hosts its passes over the growing heap took about half
    of the inventory's load time; what the step leaves for it is collected after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
