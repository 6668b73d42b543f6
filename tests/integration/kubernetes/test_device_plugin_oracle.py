"""NVIDIA's own Helm chart of the pinned release is the oracle for the device-plugin DaemonSet gpuready renders.

`helm template` (helm built from its Go module with the lab's build cache) renders the chart for each plugin setting
gpuready offers: each MIG strategy, each device list strategy (CDI among them), time-slicing, the RuntimeClass and
OpenShift's privileged plugin. The fields that decide what the plugin does (image, command and args, environment,
security context, volumes and their mounts, pod annotations, runtime class) are compared: every field that differs
must be listed, with why, in docs/kubernetes.md, and every listed difference must still be one.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, ModuleTmp
from tests.integration.kubernetes.conftest import require_go
from tests.unit.kubernetes.test_manifests import _render

#: NVIDIA's chart deployments/helm/nvidia-device-plugin of k8s-device-plugin v0.20.0, kept verbatim
#: (tests/fixtures/kubernetes/SOURCES.md): the Go module proxy serves no v0.20 release of the module.
CHART = ROOT / "tests" / "fixtures" / "kubernetes" / "nvidia-device-plugin-chart-v0.20.0"
#: The helm release that renders it, built from helm.sh/helm/v3 (a version the Go module proxy serves).
HELM_VERSION = "v3.19.0"
DOCS = ROOT / "docs" / "kubernetes.md"
CONTAINER = "nvidia-device-plugin-ctr"
RELEASE = "nvdp"

#: gpuready's settings (gpuready.kubernetes) and the chart values NVIDIA documents for the same choice.
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "defaults": ({}, {}),
    "mig-single": ({"device_plugin": {"mig_strategy": "single"}}, {"migStrategy": "single"}),
    "mig-mixed": ({"device_plugin": {"mig_strategy": "mixed"}}, {"migStrategy": "mixed"}),
    "cdi-cri": ({"device_plugin": {"device_list_strategy": "cdi-cri"}}, {"deviceListStrategy": "cdi-cri"}),
    "cdi-annotations": (
        {"device_plugin": {"device_list_strategy": "cdi-annotations"}},
        {"deviceListStrategy": "cdi-annotations"},
    ),
    "volume-mounts": (
        {"device_plugin": {"device_list_strategy": "volume-mounts"}},
        {"deviceListStrategy": "volume-mounts"},
    ),
    "time-slicing": ({"device_plugin": {"time_slicing_replicas": 4}}, {"timeSlicing": 4}),
    "runtimeclass": ({"nvidia_runtime": "runtimeclass"}, {"runtimeClassName": "nvidia"}),
    "openshift": ({"flavour": "openshift"}, {"securityContext": {"privileged": True}}),
}


def _helm() -> Path:
    require_go()
    from gpuready.lab.gobuild import GoBuild

    build = GoBuild(
        name="helm", version=HELM_VERSION, module="helm.sh/helm/v3", commands={"helm": "helm.sh/helm/v3/cmd/helm"}
    )
    build.ensure()
    return build.binary("helm")


def _values(settings: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The chart's values for gpuready's settings: the strategies it sets, the driver root for CDI, and
    time-slicing as the chart's own ConfigMap holding gpuready's configuration file."""
    plugin = settings.get("device_plugin", {})
    values: dict[str, Any] = {
        "failOnInitError": True,
        "migStrategy": plugin.get("mig_strategy", "none"),
        "deviceListStrategy": plugin.get("device_list_strategy", "envvar"),
        **{k: v for k, v in extra.items() if k != "timeSlicing"},
    }
    if values["deviceListStrategy"].startswith("cdi"):
        values["nvidiaDriverRoot"] = "/"
    if "timeSlicing" in extra:
        [config] = _render("nvidia_device_plugin", "config.yml.j2", kubernetes=settings)
        values["config"] = {"map": {"default": config["data"]["config.yaml"]}}
    return values


def _chart_daemonset(
    helm: Path, values: dict[str, Any], tmp: Path, name: str = "nvidia-device-plugin"
) -> dict[str, Any]:
    (tmp / "values.yaml").write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", "kube-system", "-f", str(tmp / "values.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [ds] = [
        d
        for d in yaml.safe_load_all(done.stdout)
        if d and d["kind"] == "DaemonSet" and d["metadata"]["name"] == f"{RELEASE}-{name}"
    ]
    return ds


def _compared(ds: dict[str, Any], name: str = CONTAINER) -> dict[str, Any]:
    """The fields that decide what the container does, by path; named list items by their name."""
    spec = ds["spec"]["template"]["spec"]
    [container] = [c for c in spec["containers"] if c["name"] == name]
    out: dict[str, Any] = {
        "image": container.get("image"),
        "command": container.get("command"),
        "args": container.get("args"),
        "runtimeClassName": spec.get("runtimeClassName"),
    }
    for key in ds["spec"]["template"]["metadata"].get("annotations") or {}:
        out[f"annotations.{key}"] = "set"  # a hash of each side's own ConfigMap: only whether there is one
    for env in container.get("env") or []:
        out[f"env[{env['name']}]"] = env.get("value", env.get("valueFrom"))
    out.update(_flat(container.get("securityContext") or {}, "securityContext"))
    for mount in container.get("volumeMounts") or []:
        out.update(_flat({k: v for k, v in mount.items() if k != "name"}, f"volumeMounts[{mount['name']}]"))
    for volume in spec.get("volumes") or []:
        out.update(_flat({k: v for k, v in volume.items() if k != "name"}, f"volumes[{volume['name']}]"))
    return out


def _flat(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{path}.{key}"))
        return out
    return {path: value}


def _documented(heading: str = "### Differences from NVIDIA's Helm chart") -> set[str]:
    """The field paths in one of the docs' tables of differences (first column, in backquotes)."""
    section = DOCS.read_text().split(heading + "\n", 1)[1].split("\n#", 1)[0]
    return {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", section, re.MULTILINE)}


def _differences(helm: Path, name: str, tmp: Path) -> set[str]:
    settings, extra = SCENARIOS[name]
    [ours] = _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=settings)
    theirs = _chart_daemonset(helm, _values(settings, extra), tmp)
    a, b = _compared(theirs), _compared(ours)
    return {p for p in a.keys() | b.keys() if a.get(p) != b.get(p)}


@pytest.fixture(scope="module")
def differences(module_tmp: ModuleTmp) -> dict[str, set[str]]:
    helm = _helm()
    return {name: _differences(helm, name, module_tmp(name)) for name in SCENARIOS}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_setting_renders_as_nvidias_chart_but_where_the_docs_say_why(
    differences: dict[str, set[str]], scenario: str
) -> None:
    assert differences[scenario] - _documented() == set(), f"{scenario}: differences not justified in {DOCS.name}"


def test_every_documented_difference_is_still_one(differences: dict[str, set[str]]) -> None:
    seen = set().union(*differences.values())
    assert _documented() - seen == set(), f"{DOCS.name} lists differences that are gone"


def test_what_mig_cdi_and_time_slicing_need_is_never_a_difference(differences: dict[str, set[str]]) -> None:
    """The parts the chart adds for MIG, CDI and time-slicing stay exactly as NVIDIA renders them."""
    must_match = {
        "mig-single": {"securityContext.capabilities.add", "env[NVIDIA_MIG_MONITOR_DEVICES]"},
        "mig-mixed": {"securityContext.capabilities.add", "env[NVIDIA_MIG_MONITOR_DEVICES]"},
        "volume-mounts": {"securityContext.capabilities.add"},
        "cdi-cri": {
            "env[NVIDIA_DRIVER_ROOT]",
            "volumeMounts[driver-root].mountPath",
            "volumeMounts[driver-root].readOnly",
            "volumes[driver-root].hostPath.path",
            "volumeMounts[cdi-root].mountPath",
            "volumes[cdi-root].hostPath.path",
            "volumes[cdi-root].hostPath.type",
        },
        "time-slicing": {"env[CONFIG_FILE]", "annotations.checksum/config"},
        "runtimeclass": {"runtimeClassName"},
        "openshift": {"securityContext.privileged"},
        "defaults": {"image", "env[FAIL_ON_INIT_ERROR]", "volumes[kubelet-device-plugins-dir].hostPath.path"},
    }
    for scenario, paths in must_match.items():
        assert paths & differences[scenario] == set(), scenario


@pytest.mark.parametrize("mig", ["none", "single"])
def test_gpu_feature_discovery_renders_as_the_charts_gfd(mig: str, tmp_path: Path) -> None:
    helm = _helm()
    settings = {"device_plugin": {"feature_discovery": True, "mig_strategy": mig}}
    values = {"gfd": {"enabled": True}, "failOnInitError": True, "migStrategy": mig}
    theirs = _chart_daemonset(helm, values, tmp_path, "nvidia-device-plugin-gpu-feature-discovery")
    [ours] = _render("nvidia_device_plugin", "gfd.yml.j2", kubernetes=settings)
    a, b = _compared(theirs, "gpu-feature-discovery-ctr"), _compared(ours, "gpu-feature-discovery-ctr")
    assert {p for p in a.keys() | b.keys() if a.get(p) != b.get(p)} == _documented(
        "### Differences of GPU Feature Discovery from NVIDIA's Helm chart"
    )
