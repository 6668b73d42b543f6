"""``gpuready validate``: read-only checks of nodes, clusters, vSphere and training performance."""

from __future__ import annotations

import click

from gpuready.core.lazy import LazyGroup

#: name -> ("module:click command", short help). Add a line when a subcommand works, not before.
COMMANDS: dict[str, tuple[str, str]] = {
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
def validate() -> None:
    """Validate GPU nodes, Kubernetes/OpenShift clusters, vSphere and training performance."""
