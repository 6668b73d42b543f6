"""Compute: a vector add on every GPU."""

from __future__ import annotations

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node.checks.commands import VECTOR_ADD_COMMAND
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Node

VECTOR_ADD_PASS = "Test PASSED"


@check(
    "compute.vector_add",
    "a vector add passes on every GPU (cuda-samples vectorAdd, cupy or torch)",
    "Install the CUDA samples (vectorAdd) or a CUDA Python library; a failure on one GPU points at that GPU.",
    depends=GPU_VIEW,
)
def vector_add(node: Node, v: Verdict) -> Check:
    gpus = node.smi.gpus
    if not gpus:
        return v.failed("no GPU visible to compute on")
    answer = node.run(VECTOR_ADD_COMMAND)
    if "== no program" in answer.stdout:
        return v.skipped("no vector add available (neither vectorAdd, cupy nor torch on the node)")
    sections = answer.stdout.split("== GPU ")[1:]
    failing = [s.split("\n", 1)[0] for s in sections if VECTOR_ADD_PASS not in s or "== rc=0" not in s]
    if len(sections) != len(gpus) or failing:
        which = ", ".join(failing) if failing else f"(output for {len(sections)} of {len(gpus)} GPUs)"
        return v.failed(f"vector add failed on GPU {which}", answer.evidence(3000))
    return v.passed(f"{VECTOR_ADD_PASS} on {len(gpus)} GPUs", answer.evidence(600))
