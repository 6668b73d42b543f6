"""Between the GPUs: NVLink links up and clean, peer-to-peer between the node class's pairs."""

from __future__ import annotations

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Node


@check(
    "topology.nvlink",
    "every GPU has the node class's NVLink links up (nvidia-smi nvlink -s)",
    "Reseat the NVLink bridge (PCIe) or check the baseboard (SXM); run the field diagnostics.",
    depends=(*GPU_VIEW, "gpu.count"),
)
def nvlink(node: Node, v: Verdict) -> Check:
    want = node.node_class.nvlink_links_per_gpu
    if not want:
        return v.skipped("the node class expects no NVLink (nvlink_links_per_gpu: 0)")
    gpus = [g for g in node.smi.gpus if not g.mig_enabled]
    in_mig = [g.index for g in node.smi.gpus if g.mig_enabled]
    if not gpus:
        return v.skipped(
            "every GPU is in MIG mode: the driver does not report NVLink state per link there (see gpu.mig)"
        )
    answer = node.run("nvidia-smi nvlink -s")
    if not answer.ok:
        return v.failed(f"nvidia-smi nvlink -s failed (exit {answer.rc})", answer.evidence())
    links = nvsmi.parse_nvlink_status(answer.stdout)
    problems = []
    for gpu in gpus:
        up = sum(links.get(gpu.index, {}).values())
        if up < want:
            down = [str(n) for n, ok in sorted(links.get(gpu.index, {}).items()) if not ok]
            problems.append(f"GPU {gpu.index}: {up}/{want} links up" + (f" (down: {','.join(down)})" if down else ""))
    skipped_note = f"; GPU {','.join(map(str, in_mig))} in MIG mode, not counted" if in_mig else ""
    if problems:
        return v.failed("; ".join(problems) + skipped_note, answer.evidence())
    return v.passed(f"{want} links up on each GPU{skipped_note}", answer.evidence(600))


@check(
    "topology.nvlink_errors",
    "no NVLink replay, recovery or CRC errors beyond the limit (nvidia-smi nvlink -e)",
    "Errors on one link: reseat the bridge or report the baseboard; run dcgmi diag -r 3; RMA if they grow.",
    depends=GPU_VIEW,
)
def nvlink_errors(node: Node, v: Verdict) -> Check:
    if not node.node_class.nvlink_links_per_gpu:
        return v.skipped("the node class expects no NVLink")
    answer = node.run("nvidia-smi nvlink -e")
    if not answer.ok:
        return v.skipped(f"nvidia-smi nvlink -e does not answer here (exit {answer.rc})", answer.evidence(300))
    counters = nvsmi.parse_nvlink_errors(answer.stdout)
    if not counters:
        # A GPU passed through without its NVLinks answers with nothing at all (recorded on an H100 VM):
        # no counter read is no evidence of a healthy link, and topology.nvlink reports the missing links.
        return v.skipped(
            "nvidia-smi nvlink -e printed no counters (no NVLink visible; see topology.nvlink)", answer.evidence(300)
        )
    limit = node.settings.node_checks.nvlink_error_limit
    bad = [
        f"GPU {g} link {link}: {name}={value}" for (g, link, name), value in sorted(counters.items()) if value > limit
    ]
    if bad:
        return v.failed(f"{len(bad)} NVLink counter(s) over {limit}: " + "; ".join(bad[:6]), answer.evidence(2000))
    return v.passed(f"{len(counters)} counters read, none over {limit}", answer.evidence(600))


@check(
    "topology.p2p",
    "peer-to-peer reads possible between the class's GPU pairs (nvidia-smi topo -p2p r)",
    "Attach NVLink-bridged GPUs together; enable ATS/ACS settings for peer-to-peer (Dell's vSphere study).",
    depends=(*GPU_VIEW, "gpu.count"),
)
def p2p(node: Node, v: Verdict) -> Check:
    pairs = node.node_class.p2p_pairs
    if not pairs:
        return v.skipped("the node class names no p2p_pairs")
    answer = node.run("nvidia-smi topo -p2p r")
    if not answer.ok:
        return v.failed(f"nvidia-smi topo -p2p r failed (exit {answer.rc})", answer.evidence())
    matrix = nvsmi.parse_p2p_matrix(answer.stdout)
    bad = [f"GPU{a}<->GPU{b}: {matrix.get((a, b), 'absent')}" for a, b in pairs if matrix.get((a, b)) != "OK"]
    if bad:
        return v.failed("peer-to-peer not possible: " + "; ".join(bad), answer.evidence())
    return v.passed(f"{len(pairs)} pair(s) peer-to-peer capable", answer.evidence(600))
