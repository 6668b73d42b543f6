"""Every manifest gpuready applies, rendered from the roles' templates with the defaults, validated against
the upstream OpenAPI schemas of Kubernetes 1.27..1.31 (kubernetes-validate), and the SCC against OpenShift's."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jinja2
import pytest
import yaml

from gpuready.core.role_defaults import role_defaults
from gpuready.core.settings import Kubernetes
from gpuready.validate.cluster import cuda_vector_add_pod
from tests.conftest import ROOT, require

ROLES = ROOT / "playbooks" / "roles"
VERSIONS = ["1.27.0", "1.28.0", "1.29.0", "1.30.0", "1.31.0"]
# The NVIDIA runtime offered through a RuntimeClass, time-slicing 4 ways, MIG single, CDI device lists.
SHARED = {
    "nvidia_runtime": "runtimeclass",
    "device_plugin": {"time_slicing_replicas": 4, "mig_strategy": "single", "device_list_strategy": "cdi-cri"},
}
OPENSHIFT = {"flavour": "openshift"}
#: One plugin setting at a time: each MIG strategy, each device list strategy NVIDIA documents, time-slicing.
PLUGIN_SCENARIOS = {
    "mig-single": {"device_plugin": {"mig_strategy": "single"}},
    "mig-mixed": {"device_plugin": {"mig_strategy": "mixed"}},
    "cdi-cri": {"device_plugin": {"device_list_strategy": "cdi-cri"}},
    "cdi-annotations": {"device_plugin": {"device_list_strategy": "cdi-annotations"}},
    "volume-mounts": {"device_plugin": {"device_list_strategy": "volume-mounts"}},
    "time-slicing": {"device_plugin": {"time_slicing_replicas": 4}},
}
# validate gpu-node --mark-nodes: one node passed, one failed, one the cluster does not know.
NODE_MARKS = {
    "node_validation_marks_verdicts": {
        "stor1.r5a.local": {"result": "passed", "date": "2026-11-23", "failed_checks": []},
        "stor2.r5a.local": {
            "result": "failed",
            "date": "2026-11-23",
            "failed_checks": ["gpu.ecc_volatile", "gpu.xid"],
            "taint_value": "gpu.ecc_volatile",
        },
        "gone.r5a.local": {"result": "passed", "date": "2026-11-23", "failed_checks": []},
    },
    "node_validation_marks_known": ["stor1.r5a.local", "stor2.r5a.local", "infra1.r5a.local"],
}
SCC_SCHEMA = ROOT / "tests" / "fixtures" / "kubernetes" / "securitycontextconstraints-v1.openapi.yaml"


def _render(
    role: str, template: str, overrides: dict[str, Any] | None = None, kubernetes: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Render a role template with its defaults resolved from the gpuready settings defaults (as Ansible would)."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["to_json"] = env.filters["tojson"]
    env.filters["from_json"] = json.loads
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("true", "yes", "1")
    env.filters["combine"] = lambda a, b: {**a, **b}
    settings = {
        "kubernetes": Kubernetes(**(kubernetes or {})).model_dump(),
        "node_classes": {"r750xa": {"gpu_count": 4}},
    }
    nodes = ["stor1.r5a.local", "stor2.r5a.local"]
    context: dict[str, Any] = {
        "gpuready": settings,
        "groups": {"gpu_nodes": nodes},
        "gpuready_state": "present",
        "hostvars": {n: {} for n in nodes},
    }
    defaults = role_defaults(role)  # with its dependencies' (the common role's), as Ansible merges them
    for _ in range(3):  # defaults refer to each other; resolve until stable
        for key, value in defaults.items():
            context[key] = (
                yaml.safe_load(env.from_string(value).render(context))
                if isinstance(value, str) and "{{" in value
                else value
            )
    if role == "nvidia_device_plugin":  # the set_fact before the apply: the rendered configuration's hash
        config = env.from_string((ROLES / role / "templates" / "config.yml.j2").read_text()).render(context)
        context["nvidia_device_plugin_config_checksum"] = hashlib.sha256(config.encode()).hexdigest()
    context.update(overrides or {})
    text = env.from_string((ROLES / role / "templates" / template).read_text()).render(context)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def manifests() -> list[tuple[str, dict[str, Any]]]:
    docs = [("serviceaccount", d) for d in _render("nvidia_device_plugin", "serviceaccount.yml.j2")]
    docs += [("daemonset", d) for d in _render("nvidia_device_plugin", "daemonset.yml.j2")]
    docs += [
        ("daemonset-private-registry", d)
        for d in _render(
            "nvidia_device_plugin", "daemonset.yml.j2", {"nvidia_device_plugin_image": "registry.example/nvidia/dp:v1"}
        )
    ]
    docs += [
        ("daemonset-runtimeclass-timeslicing", d)
        for d in _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=SHARED)
    ]
    docs += [("runtimeclass", d) for d in _render("nvidia_device_plugin", "runtimeclass.yml.j2", kubernetes=SHARED)]
    docs += [("plugin-config", d) for d in _render("nvidia_device_plugin", "config.yml.j2", kubernetes=SHARED)]
    docs += [("gfd", d) for d in _render("nvidia_device_plugin", "gfd.yml.j2", kubernetes=SHARED)]
    docs += [
        (f"daemonset-{name}", d)
        for name, settings in PLUGIN_SCENARIOS.items()
        for d in _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=settings)
    ]
    docs += [("node-labels", d) for d in _render("gpu_node_labels", "node-labels.yml.j2")]
    docs += [
        ("node-labels-absent", d)
        for d in _render("gpu_node_labels", "node-labels.yml.j2", {"gpu_node_labels_state": "absent"})
    ]
    docs += [("node-marks", d) for d in _render("node_validation_marks", "node-marks.yml.j2", NODE_MARKS)]
    docs += [("namespace", d) for d in _render("openshift_gpu_scc", "namespace.yml.j2")]
    docs += [
        ("daemonset-openshift", d) for d in _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=OPENSHIFT)
    ]
    docs += [("scc-role", d) for d in _render("openshift_gpu_scc", "role.yml.j2", kubernetes=OPENSHIFT)]
    docs += [("scc-rolebinding", d) for d in _render("openshift_gpu_scc", "rolebinding.yml.j2", kubernetes=OPENSHIFT)]
    image = Kubernetes().cuda_vector_add_image
    docs += [("cuda-vector-add", cuda_vector_add_pod("stor1.r5a.local", image, "r1"))]
    docs += [
        (
            "cuda-vector-add-runtimeclass",
            cuda_vector_add_pod("stor1.r5a.local", image, "r1", hostname="stor1", runtime_class="nvidia"),
        )
    ]
    return docs


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "manifest"), manifests(), ids=[n for n, _ in manifests()])
def test_manifest_is_valid_kubernetes(version: str, name: str, manifest: dict[str, Any]) -> None:
    import kubernetes_validate

    # strict: an unknown field (a typo) is an error, as a real API server's field validation would say.
    kubernetes_validate.validate(manifest, version, strict=True)


def test_daemonset_follows_the_seed_and_the_issue() -> None:
    ds = _render("nvidia_device_plugin", "daemonset.yml.j2")[0]
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"openshift.com/gpu-accelerator": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["volumes"][0]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"
    assert spec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert spec["containers"][0]["resources"]["requests"]


# NVIDIA k8s-device-plugin README, "As command line flags or envvars": the plugin's options and their values;
# the NVIDIA Container Toolkit's NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES and NVIDIA_MIG_MONITOR_DEVICES
# ("Environment variables (OCI spec)"), which the chart sets on the plugin container.
PLUGIN_OPTIONS = {
    "FAIL_ON_INIT_ERROR": {"true", "false"},
    "MIG_STRATEGY": {"none", "single", "mixed"},
    "DEVICE_LIST_STRATEGY": {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"},
    "CONFIG_FILE": None,
    "NVIDIA_DRIVER_ROOT": None,
    "NVIDIA_VISIBLE_DEVICES": {"all"},
    "NVIDIA_DRIVER_CAPABILITIES": {"compute,utility"},
    "NVIDIA_MIG_MONITOR_DEVICES": {"all"},
}


def _env(ds: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in ds["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("scenario", [None, *PLUGIN_SCENARIOS])
def test_plugin_fails_on_init_error_and_sets_only_options_nvidia_documents(scenario: str | None) -> None:
    env = _env(_render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=PLUGIN_SCENARIOS.get(scenario or ""))[0])
    assert env["FAIL_ON_INIT_ERROR"] == "true"
    for name, value in env.items():
        assert name in PLUGIN_OPTIONS and (PLUGIN_OPTIONS[name] is None or value in PLUGIN_OPTIONS[name]), name


def _mounts(ds: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}


def test_a_new_time_slicing_configuration_changes_the_pod_template() -> None:
    """The pod template carries the configuration's checksum (the chart's checksum/config), so the DaemonSet
    controller replaces the plugin pods when the configuration changes."""
    [two, four] = [
        _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes={"device_plugin": {"time_slicing_replicas": n}})[
            0
        ]
        for n in (2, 4)
    ]
    assert two["spec"]["template"] != four["spec"]["template"]
    assert two["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


@pytest.mark.parametrize("strategy", ["single", "mixed"])
def test_mig_strategies_get_what_nvidias_chart_adds(strategy: str) -> None:
    [ds] = _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes={"device_plugin": {"mig_strategy": strategy}})
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert _env(ds)["NVIDIA_MIG_MONITOR_DEVICES"] == "all"


@pytest.mark.parametrize("strategy", ["cdi-cri", "cdi-annotations"])
def test_cdi_strategies_mount_the_driver_root_and_the_cdi_folder(strategy: str) -> None:
    [ds] = _render(
        "nvidia_device_plugin", "daemonset.yml.j2", kubernetes={"device_plugin": {"device_list_strategy": strategy}}
    )
    assert _mounts(ds)["driver-root"] == "/driver-root" and _mounts(ds)["cdi-root"] == "/var/run/cdi"
    volumes = {v["name"]: v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["driver-root"] == _env(ds)["NVIDIA_DRIVER_ROOT"] == "/"
    plain = _render("nvidia_device_plugin", "daemonset.yml.j2")[0]
    assert "driver-root" not in _mounts(plain) and "NVIDIA_MIG_MONITOR_DEVICES" not in _env(plain)


def test_runtimeclass_time_slicing_mig_and_cdi_reach_the_daemonset() -> None:
    ds = _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=SHARED)[0]
    spec = ds["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    env = _env(ds)
    assert (env["MIG_STRATEGY"], env["DEVICE_LIST_STRATEGY"]) == ("single", "cdi-cri")
    [mount] = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "config"]
    assert env["CONFIG_FILE"] == f"{mount['mountPath']}/config.yaml"
    [rc] = _render("nvidia_device_plugin", "runtimeclass.yml.j2", kubernetes=SHARED)
    assert (rc["metadata"]["name"], rc["handler"]) == ("nvidia", "nvidia")  # handler: the runtime nvidia-ctk adds
    [cm] = _render("nvidia_device_plugin", "config.yml.j2", kubernetes=SHARED)
    config = yaml.safe_load(cm["data"]["config.yaml"])
    # README, "With CUDA Time-Slicing": sharing.timeSlicing.resources[{name, replicas}].
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert config["flags"]["migStrategy"] == "single" and config["flags"]["failOnInitError"] is True


def test_default_runtime_needs_no_runtimeclass() -> None:
    spec = _render("nvidia_device_plugin", "daemonset.yml.j2")[0]["spec"]["template"]["spec"]
    assert "runtimeClassName" not in spec
    assert "CONFIG_FILE" not in _env(_render("nvidia_device_plugin", "daemonset.yml.j2")[0])


def test_node_labels_only_for_gpu_nodes_and_empty_when_absent() -> None:
    present = _render("gpu_node_labels", "node-labels.yml.j2")
    assert [d["metadata"]["name"] for d in present] == ["stor1.r5a.local", "stor2.r5a.local"]
    assert present[0]["metadata"]["labels"] == {
        "openshift.com/gpu-accelerator": "true",
        "nvidia.com/gpu.present": "true",
    }
    absent = _render("gpu_node_labels", "node-labels.yml.j2", {"gpu_node_labels_state": "absent"})
    assert all(d["metadata"]["labels"] == {} for d in absent)


def _openapi_to_json_schema(node: Any) -> Any:
    """OpenAPI v3 'nullable: true' is JSON Schema's type [X, null]."""
    if isinstance(node, dict):
        out = {k: _openapi_to_json_schema(v) for k, v in node.items() if k not in ("nullable", "format")}
        if node.get("nullable"):
            out["type"] = [node["type"], "null"]
        return out
    if isinstance(node, list):
        return [_openapi_to_json_schema(v) for v in node]
    return node


def test_scc_is_valid_against_openshifts_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    require(SCC_SCHEMA.is_file(), f"vendored SCC schema {SCC_SCHEMA}")
    schema = _openapi_to_json_schema(yaml.safe_load(SCC_SCHEMA.read_text()))
    scc = _render("openshift_gpu_scc", "scc.yml.j2", kubernetes=OPENSHIFT)[0]
    jsonschema.validate(scc, schema)
    # Granted through RBAC in the plugin's project, not by listing the account cluster-wide in the SCC.
    assert scc["users"] == [] and scc["groups"] == []
    assert scc["allowHostDirVolumePlugin"] is True and scc["allowPrivilegedContainer"] is True
    assert not (scc["allowHostNetwork"] or scc["allowHostPID"] or scc["allowHostIPC"] or scc["allowHostPorts"])
    # The schema catches what a real OpenShift refuses: a required field left out.
    broken = {k: v for k, v in scc.items() if k != "requiredDropCapabilities"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_schema_validation_catches_a_typo() -> None:
    import kubernetes_validate

    ds = _render("nvidia_device_plugin", "daemonset.yml.j2")[0]
    ds["spec"]["template"]["spec"]["nodeSelecter"] = ds["spec"]["template"]["spec"].pop("nodeSelector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, "1.31.0", strict=True)


# Red Hat, OpenShift 4 "Managing security context constraints" > "Role-based access to security context
# constraints": `oc create role <role-name> --verb=use --resource=scc --resource-name=<scc-name> -n <namespace>`
# "results in the following role definition" (rules as documented there).
RED_HAT_SCC_ROLE_RULES = [
    {
        "apiGroups": ["security.openshift.io"],
        "resourceNames": ["<scc-name>"],
        "resources": ["securitycontextconstraints"],
        "verbs": ["use"],
    }
]
# NVIDIA's GPU Operator runs the device plugin on OpenShift as a privileged container
# (gpu-operator assets/state-device-plugin/0500_daemonset.yaml), its Role may `use` an SCC (0200_role.yaml).


def test_openshift_grants_the_scc_through_a_role_in_the_plugins_own_project() -> None:
    [role] = _render("openshift_gpu_scc", "role.yml.j2", kubernetes=OPENSHIFT)
    [binding] = _render("openshift_gpu_scc", "rolebinding.yml.j2", kubernetes=OPENSHIFT)
    [scc] = _render("openshift_gpu_scc", "scc.yml.j2", kubernetes=OPENSHIFT)
    expected = json.loads(json.dumps(RED_HAT_SCC_ROLE_RULES).replace("<scc-name>", scc["metadata"]["name"]))
    assert role["rules"] == expected
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "nvidia-device-plugin"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    [ds] = _render("nvidia_device_plugin", "daemonset.yml.j2", kubernetes=OPENSHIFT)
    [sa] = _render("nvidia_device_plugin", "serviceaccount.yml.j2", kubernetes=OPENSHIFT)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    ]
    assert ds["metadata"]["namespace"] == sa["metadata"]["namespace"] == "nvidia-device-plugin"
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert ds["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {"privileged": True}


def test_plain_kubernetes_keeps_the_unprivileged_plugin_in_kube_system() -> None:
    [ds] = _render("nvidia_device_plugin", "daemonset.yml.j2")
    assert ds["metadata"]["namespace"] == "kube-system"
    assert ds["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


@pytest.mark.parametrize("namespace", ["kube-system", "default", "openshift"])
def test_openshift_refuses_a_default_namespace_for_the_plugin(namespace: str) -> None:
    with pytest.raises(ValueError, match=f"{namespace} is one of OpenShift's default namespaces"):
        Kubernetes(flavour="openshift", device_plugin={"namespace": namespace})
    assert Kubernetes(flavour="openshift", device_plugin={"namespace": "gpu"}).device_plugin.namespace == "gpu"


def test_the_vector_add_pod_is_pinned_to_the_kubernetes_node_not_the_inventory_name() -> None:
    # The Node object's own hostname label, as the kubelet set it (it may differ from the node's name).
    by_label = cuda_vector_add_pod("stor1.r5a.local", "img", "r1", hostname="stor1")
    assert by_label["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "stor1"}
    assert "affinity" not in by_label["spec"] and "runtimeClassName" not in by_label["spec"]
    # A node without that label: its name, through the scheduler (as the DaemonSet controller pins its pods).
    by_name = cuda_vector_add_pod("stor1.r5a.local", "img", "r1")
    [term] = by_name["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["stor1.r5a.local"]}]}
    assert "nodeSelector" not in by_name["spec"]


def test_in_runtimeclass_mode_the_vector_add_pod_names_the_roles_runtimeclass() -> None:
    from gpuready.core import role_defaults

    [rc] = _render("nvidia_device_plugin", "runtimeclass.yml.j2", kubernetes=SHARED)
    assert role_defaults.runtime_class_name() == rc["metadata"]["name"]
    pod = cuda_vector_add_pod("n", "img", "r1", runtime_class=role_defaults.runtime_class_name())
    assert pod["spec"]["runtimeClassName"] == "nvidia"


def test_the_default_vector_add_image_is_nvidias_cuda_sample() -> None:
    # NVIDIA's vectorAdd sample of CUDA 12.5.0 on Ubuntu 22.04, which runs on GH200 (arm64) as on x86_64 nodes.
    assert Kubernetes().cuda_vector_add_image == "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
