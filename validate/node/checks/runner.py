"""Running the catalogue on one node: in order, a check whose dependency did not pass skipped, naming it."""

from __future__ import annotations

import logging
from functools import cache

from gpuready.core.results import Check, errored, failed, skipped
from gpuready.core.verdict import Verdict, blocks
from gpuready.validate.node.checks.commands import MEASURING, perf_budget, perf_commands
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import CATALOGUE, CheckDef
from gpuready.validate.node.node import Answer, Node, NoGpuView

log = logging.getLogger(__name__)


def run_check(definition: CheckDef, node: Node) -> Check:
    """Run one check; a GPU view that cannot be read fails the check with that one clear reason."""
    try:
        result = definition.run(node)
    except NoGpuView as e:
        result = failed(definition.id, node.name, str(e), node.smi_xml.evidence())
    except Exception as e:  # a surprise in one check is that check's error; the others still run
        log.debug("check %s on %s", definition.id, node.name, exc_info=True)
        return errored(definition.id, node.name, f"the check itself failed: {type(e).__name__}: {e}")
    if result.status == "failed" and not result.remedy:
        result.remedy = definition.remedy
    _say_undecodable(node, result)
    return result


#: What the evidence says when node text with bytes that are not UTF-8 landed in a check's verdict.
UNDECODABLE = "bytes that are not UTF-8 shown as \ufffd"


def _say_undecodable(node: Node, result: Check) -> None:
    """A U+FFFD in a verdict from a node whose output held bytes that are not UTF-8: the evidence names the
    command and the count, so nobody takes the replacement for what the node printed."""
    if "\ufffd" not in result.message + result.evidence or UNDECODABLE in result.evidence:
        return
    odd = node.undecodable()
    if odd:
        said = "; ".join(f"{a.command}: {a.undecodable}" for a in odd)
        result.evidence = f"{result.evidence}\n({UNDECODABLE}: {said})".lstrip("\n")


#: Checks of the NVIDIA software only a GPU node gets (the provisioning roles install none of it on a node whose
#: class expects no GPU), besides those that need the driver loaded.
NVIDIA_SOFTWARE = (
    "driver.nouveau_absent",
    "node.selinux_labels",
    "node.container_runtime",
    "node.device_plugin_socket",
)
#: Message of a check skipped on a node whose class expects no GPU, as the provisioning roles say it.
NO_GPU_EXPECTED = "the node class expects no GPU (gpu_count 0)"


@cache
def gpu_only() -> frozenset[str]:
    """The checks that judge GPUs or NVIDIA software: the driver's module and whatever depends on it, in
    catalogue order (a dependency comes first), and ``NVIDIA_SOFTWARE``. Worked out once per process: the
    catalogue does not change, and a fan-out asks it for every host."""
    needs = {"driver.nvidia_module", *NVIDIA_SOFTWARE}
    for definition in CATALOGUE:
        if set(definition.depends) & needs:
            needs.add(definition.id)
    return frozenset(needs)


def run_catalogue(node: Node, only: set[str] | None = None) -> list[Check]:
    """Every check in catalogue order; one whose dependency did not pass is skipped, naming it. On a node whose
    class expects no GPU, the GPU checks are skipped as such: ``provision cluster`` installs no driver there."""
    results: dict[str, Check] = {}
    measured = False
    # 0, not None: a node-local run without settings has no count declared and judges the GPUs it finds.
    skipped_for_no_gpu = gpu_only() if node.node_class.gpu_count == 0 else frozenset()
    for definition in CATALOGUE:
        if only is not None and definition.id not in only:
            continue
        if definition.id in skipped_for_no_gpu:
            results[definition.id] = skipped(definition.id, node.name, NO_GPU_EXPECTED)
            continue
        if not measured and definition.id in MEASURING and node.host is not None:
            measured = True
            _measure(node, only, results)
        cause = next((d for d in definition.depends if d in results and blocks(results[d])), None)
        if cause is not None:
            results[definition.id] = Verdict(definition.id, node.name).depends_on(results[cause])
        else:
            results[definition.id] = run_check(definition, node)
    return list(results.values())


def _measure(node: Node, only: set[str] | None, results: dict[str, Check]) -> None:
    """The measuring commands' answers, only where the GPUs can be read (a node that failed the GPU view would
    skip every measuring check anyway): read from the host's one connection, where they followed the fixed
    commands (validate_host), or asked for in a batch of their own."""
    view = results.get(GPU_VIEW[0])
    if view is not None and view.status != "passed":
        return
    budget = perf_budget(node.settings, only)
    if node.on_measure is not None:
        node.on_measure(budget + 10)
    try:
        node.prefetch(perf_commands(node.settings, only), timeout=budget)
    except ConnectionError as e:  # each measuring check says its command did not finish; none is run again
        for command in perf_commands(node.settings, only):
            node.record(Answer(command, 124, "", str(e)))
