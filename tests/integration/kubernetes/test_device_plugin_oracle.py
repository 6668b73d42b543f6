"""NVIDIA's own static device-plugin manifest (deployments/static/ in the github.com/NVIDIA/k8s-device-plugin
module) is the oracle for the DaemonSet gpuready renders: every field that differs must be listed, with why,
in docs/kubernetes.md, and every listed difference must still be one."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.conftest import ROOT
from tests.integration.kubernetes.conftest import require_go
from tests.unit.kubernetes.test_manifests import _render

MODULE = "github.com/NVIDIA/k8s-device-plugin"
#: The release whose static manifest is the oracle; the proxy serves this one of the v0.17 series.
VERSION = "v0.17.2"
#: The checksum database has no record of this version; its module hash is pinned here instead.
CHECKSUM = "h1:9FShch91NgucN6vw+tyjzqBFkBrmy53OYcOFsRiwQAU="
STATIC = "deployments/static/nvidia-device-plugin.yml"
DOCS = ROOT / "docs" / "kubernetes.md"


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaves by path; list items of named things (containers, env, volumes) by their name."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
        out = {}
        for index, item in enumerate(value):
            name = item.get("name") or item.get("key") or str(index)
            out.update(_flatten(item, f"{path}[{name}]"))
        return out
    return {path: value}


def _documented() -> set[str]:
    """The field paths in the docs' table of differences (first column, in backquotes)."""
    section = DOCS.read_text().split("### Differences from NVIDIA's static manifest", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", section, re.MULTILINE)}


def test_rendered_daemonset_differs_from_nvidias_only_where_the_docs_say_why() -> None:
    require_go()
    from gpuready.lab.gobuild import module_file

    oracle = yaml.safe_load(module_file(MODULE, VERSION, STATIC, CHECKSUM).read_text())
    ours = _render("nvidia_device_plugin", "daemonset.yml.j2")[0]
    theirs, mine = _flatten(oracle), _flatten(ours)
    differences = {p for p in theirs.keys() | mine.keys() if theirs.get(p) != mine.get(p)}
    documented = _documented()
    assert differences - documented == set(), "differences not justified in docs/kubernetes.md"
    assert documented - differences == set(), "docs/kubernetes.md lists differences that are gone"
    # The parts that make it NVIDIA's plugin stay exactly as NVIDIA ships them.
    for path in (
        "spec.selector.matchLabels.name",
        "spec.template.spec.volumes[device-plugin].hostPath.path",
        "spec.template.spec.priorityClassName",
        "spec.template.spec.tolerations[nvidia.com/gpu].operator",
    ):
        assert mine[path] == theirs[path], path
