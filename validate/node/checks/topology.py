"""Between the GPUs: NVLink links up and clean, peer-to-peer between the node class's pairs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi
from gpuready.validate.node.checks.commands import IMEX_COMMAND
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Node

#: NVLink 5 of GB200 and GB300 (18 links a GPU): `nvidia-smi nvlink -s` reads 53.125 GB/s on every link of a GB200
#: (NVIDIA/k8s-test-infra issue 371, recorded; tests/fixtures/gpu/nvlink) and of a B300 SXM6.
NVLINK5_GBPS = 53.125
NVLINK5_MODELS = ("GB200", "GB300")


@check(
    "topology.nvlink",
    "every GPU has the node class's NVLink links up, each at full speed (nvidia-smi nvlink -s; GB200/GB300: "
    "53.125 GB/s a link)",
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
    speeds = nvsmi.parse_nvlink_speeds(answer.stdout)
    fastest = max((gbps for links_of in speeds.values() for gbps in links_of.values()), default=0.0)
    problems = []
    for gpu in gpus:
        up = sum(links.get(gpu.index, {}).values())
        if up < want:
            down = [str(n) for n, ok in sorted(links.get(gpu.index, {}).items()) if not ok]
            problems.append(f"GPU {gpu.index}: {up}/{want} links up" + (f" (down: {','.join(down)})" if down else ""))
        # Every link of one GPU model trains to one speed: a slower one is degraded. NVLink 5 of GB200/GB300
        # has its speed known (NVLINK5_GBPS); elsewhere the node's fastest link is the yardstick.
        expected = NVLINK5_GBPS if any(m in gpu.name for m in NVLINK5_MODELS) else fastest
        slow = [f"{n} at {gbps:g}" for n, gbps in sorted(speeds.get(gpu.index, {}).items()) if gbps < expected]
        if slow:
            problems.append(f"GPU {gpu.index}: link(s) below {expected:g} GB/s: {', '.join(slow)} GB/s")
    skipped_note = f"; GPU {','.join(map(str, in_mig))} in MIG mode, not counted" if in_mig else ""
    if problems:
        return v.failed("; ".join(problems) + skipped_note, answer.evidence())
    at = f" at {fastest:g} GB/s" if fastest else ""
    return v.passed(f"{want} links up on each GPU{at}{skipped_note}", answer.evidence(600))


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


@check(
    "topology.nvlink_domain",
    "GB200/GB300 NVL (nvlink_domain): the IMEX service active and its domain UP with every node READY; every GPU's "
    "fabric Completed/Success and Healthy, one fabric cluster UUID and clique id on the node",
    "Start the IMEX service (systemctl enable --now nvidia-imex) with the domain's node list in "
    "/etc/nvidia-imex/nodes_config.cfg (NVIDIA IMEX guide); a node not READY: check its daemon and network; a "
    "fabric not Completed or another clique: check the rack's NVLink switch trays (NMX-Manager).",
    depends=GPU_VIEW,
)
def nvlink_domain(node: Node, v: Verdict) -> Check:
    if not node.node_class.nvlink_domain:
        return v.skipped("the node class is not part of a multi-node NVLink domain (nvlink_domain: false)")
    gpus = node.smi.gpus
    if not gpus:
        return v.skipped("no GPU visible (see gpu.count)")
    problems = []
    answer = node.run(IMEX_COMMAND)
    first, _, rest = answer.stdout.partition("\n")
    service = first.removeprefix("service:").strip()
    if service != "active":
        problems.append(f"nvidia-imex is {service or 'not installed'}")
    domain = nvsmi.parse_imex_domain(rest)
    if service == "active" and domain.state != "UP":
        problems.append(f"IMEX domain {domain.state or 'state not reported'}")
    problems += [f"IMEX node {n} ({ip}) {state}" for n, (ip, state) in sorted(domain.nodes.items()) if state != "READY"]
    for g in gpus:
        if g.fabric_state != "Completed" or g.fabric_status not in ("Success", *nvsmi.NOT_AVAILABLE):
            problems.append(f"GPU {g.index}: fabric {g.fabric_state or 'N/A'}/{g.fabric_status or 'N/A'}")
        if g.fabric_health and g.fabric_health != "Healthy":
            problems.append(f"GPU {g.index}: fabric health {g.fabric_health} (bandwidth {g.fabric_bandwidth or 'N/A'})")
    clusters = {g.fabric_cluster for g in gpus}
    cliques = {g.fabric_clique for g in gpus}
    if "" in clusters or len(clusters) > 1 or len(cliques) > 1:
        problems.append(
            "GPUs disagree on the fabric cluster/clique: "
            + ", ".join(f"GPU {g.index} {g.fabric_cluster or 'N/A'}/{g.fabric_clique or 'N/A'}" for g in gpus)
        )
    evidence = (
        answer.evidence(1500)
        + "\nfabric per GPU (state/status health bandwidth cluster clique): "
        + "; ".join(
            f"{g.index}={g.fabric_state or 'N/A'}/{g.fabric_status or 'N/A'} {g.fabric_health or 'N/A'} "
            f"{g.fabric_bandwidth or 'N/A'} {g.fabric_cluster or 'N/A'} {g.fabric_clique or 'N/A'}"
            for g in gpus
        )
    )
    identity = {"cluster": next(iter(clusters)), "clique": next(iter(cliques))} if len(clusters) == 1 else {}
    if problems:
        found = v.failed("; ".join(problems), evidence)
    else:
        found = v.passed(
            f"IMEX domain UP ({len(domain.nodes)} nodes READY), fabric cluster {identity['cluster']} clique "
            f"{identity['clique']} on {len(gpus)} GPUs",
            evidence,
        )
    return DomainCheck(**vars(found), identity=identity)


@dataclass
class DomainCheck(Check):
    """topology.nvlink_domain's result with the node's fabric identity (cluster, clique), for the run-wide rule."""

    identity: dict[str, str] = field(default_factory=dict, repr=False)


def across_domains(checks: list[Check], domains: dict[str, str]) -> None:
    """The hosts of one NVLink domain (``domains``: host -> the rack's name, the host variable
    ``gpuready_nvlink_domain``) all report one fabric cluster UUID and clique id: a host that reports another
    than most of its rack's fails topology.nvlink_domain (it is in another NVLink partition, or not registered)."""
    racks: dict[str, list[DomainCheck]] = {}
    for c in checks:
        if isinstance(c, DomainCheck) and c.identity and c.host in domains:
            racks.setdefault(domains[c.host], []).append(c)
    for rack, members in racks.items():
        counted = Counter((c.identity["cluster"], c.identity["clique"]) for c in members)
        if len(counted) < 2:
            continue
        (cluster, clique), most = counted.most_common(1)[0]
        for c in members:
            if (c.identity["cluster"], c.identity["clique"]) == (cluster, clique):
                continue
            problem = (
                f"rack {rack}: this node reports fabric cluster {c.identity['cluster']} clique {c.identity['clique']}, "
                f"{most} of the rack's {len(members)} nodes cluster {cluster} clique {clique}"
            )
            c.message = problem if c.status == "passed" else f"{c.message}; {problem}"
            c.status = "failed"
