"""``gpuready validate node-condition``: put a node verdict on its Kubernetes node, as a condition and the opt-in taint.

Run after the node-local checks (in the periodic DaemonSet, or by hand); it reads their verdict file and
patches the node through the API. Exit 0 when the node shows the verdict (a failed verdict included: the
checks' own run reports their failure), 2 for a verdict file it cannot read or a node the API does not
know, 3 when the API cannot be reached or refuses (one line naming the verb and resource).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from gpuready.core.command import fail
from gpuready.core.errors import BadInput, GpureadyError


@click.command("node-condition")
@click.option(
    "--verdict",
    "verdict_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The node verdict JSON written by the node-local checks.",
)
@click.option(
    "--node",
    default=lambda: os.environ.get("NODE_NAME", ""),
    show_default="$NODE_NAME",
    help="The Kubernetes node to mark (in a pod: spec.nodeName through the downward API).",
)
@click.option(
    "--taint",
    is_flag=True,
    envvar="GPUREADY_TAINT",
    show_envvar=True,
    help="Also taint a failed node gpuready.io/validation-failed=<check>:NoSchedule (opt-in, as --mark-nodes); "
    "the taint is removed when the checks pass again, with or without this flag.",
)
@click.option(
    "--kubeconfig",
    default="",
    help="kubeconfig to use; default $KUBECONFIG, ~/.kube/config, then the pod's service account.",
)
@click.option("--context", "kube_context", default="", help="kubeconfig context; default the current one.")
def node_condition(verdict_path: Path, node: str, taint: bool, kubeconfig: str, kube_context: str) -> None:
    """Set the node's GpureadyCheckFailed condition (and the opt-in taint) from a node verdict; clear them on a pass."""
    from gpuready.core.platforms import kube
    from gpuready.core.platforms import node_condition as condition
    from gpuready.core.settings import Kubernetes
    from gpuready.validate.node import node_verdict

    try:
        if not node:
            raise BadInput("--node is empty: name the Kubernetes node (in a pod, set NODE_NAME from spec.nodeName)")
        checks = node_verdict.read(verdict_path)["checks"]
        client = kube.connect(Kubernetes(kubeconfig=kubeconfig, context=kube_context))
        outcome = condition.apply(client, node, checks, taint=taint)
    except GpureadyError as e:
        fail(str(e), e.exit_code)
    click.echo(outcome.line())
    sys.exit(0)
