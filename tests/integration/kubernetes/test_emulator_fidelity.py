"""Emulator fidelity: each behaviour of a real API server that gpuready relies on, pinned one per test.

If the emulator ever drifts from a real cluster for a call gpuready makes, one of these fails.
"""

from __future__ import annotations

import pytest

from tests.integration.kubernetes.conftest import Http, eventually

NODE = "/api/v1/nodes/stor1.lab.local"
DS = "/apis/apps/v1/namespaces/kube-system/daemonsets"


def daemonset(name: str = "demo", node_selector: dict | None = None, image: str = "example/app:1") -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"nodeSelector": node_selector or {"role": "x"},
                                           "containers": [{"name": "main", "image": image}]}}}}


def node_labels(labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "stor1.lab.local", "labels": labels}}


# -- server-side apply
def test_apply_creates_the_object_when_absent(http: Http) -> None:
    r = http.apply(f"{DS}/demo", daemonset())
    assert r.status_code == 201
    body = r.json()
    assert body["metadata"]["generation"] == 1 and body["metadata"]["uid"]
    assert [m["manager"] for m in body["metadata"]["managedFields"]] == ["gpuready"]
    assert body["metadata"]["managedFields"][0]["operation"] == "Apply"
    assert http("GET", f"{DS}/demo").status_code == 200


def config_map(data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data}


CM = "/api/v1/namespaces/default/configmaps"


def test_apply_of_an_unchanged_config_changes_nothing(http: Http) -> None:
    # A ConfigMap: no controller writes its status in between, so the resourceVersion is ours alone.
    first = http.apply(f"{CM}/cm", config_map({"a": "1"})).json()
    second = http.apply(f"{CM}/cm", config_map({"a": "1"}))
    assert second.status_code == 200
    assert second.json()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second.json()["metadata"]["managedFields"] == first["metadata"]["managedFields"]
    third = http.apply(f"{CM}/cm", config_map({"a": "2"}))
    assert third.json()["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]


def test_apply_of_a_changed_config_bumps_generation_and_resource_version(http: Http) -> None:
    first = http.apply(f"{DS}/demo", daemonset()).json()
    second = http.apply(f"{DS}/demo", daemonset(image="example/app:2")).json()
    assert second["metadata"]["generation"] == 2
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_apply_merges_by_field_manager_and_removes_only_what_the_manager_dropped(http: Http) -> None:
    http.apply(NODE, node_labels({"ours": "1", "shared": "x"}), manager="gpuready")
    http.apply(NODE, node_labels({"theirs": "1", "shared": "x"}), manager="someone-else")
    labels = http("GET", NODE).json()["metadata"]["labels"]
    assert {labels["ours"], labels["theirs"], labels["shared"]} == {"1", "x"}
    assert labels["kubernetes.io/hostname"] == "stor1.lab.local"  # the kubelet's label is untouched
    # gpuready applies an empty set: it drops its own label; the shared one stays (someone else owns it too).
    labels = http.apply(NODE, node_labels({}), manager="gpuready").json()["metadata"]["labels"]
    assert "ours" not in labels and labels["shared"] == "x" and labels["theirs"] == "1"


def test_apply_conflicting_with_another_manager_is_a_409_unless_forced(http: Http) -> None:
    http.apply(f"{DS}/demo", daemonset(image="example/app:1"))
    # Someone edits the image with an ordinary update: they now own the field.
    http("PATCH", f"{DS}/demo", {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "example/app:edited"}]}}}}, "application/strategic-merge-patch+json",
        fieldManager="kubectl-edit").raise_for_status()
    r = http.apply(f"{DS}/demo", daemonset(image="example/app:1"))
    assert r.status_code == 409
    status = r.json()
    assert (status["kind"], status["status"], status["reason"]) == ("Status", "Failure", "Conflict")
    assert "kubectl-edit" in status["message"] and status["details"]["causes"][0]["reason"] == "FieldManagerConflict"
    forced = http.apply(f"{DS}/demo", daemonset(image="example/app:1"), force="true")
    assert forced.status_code == 200
    assert forced.json()["spec"]["template"]["spec"]["containers"][0]["image"] == "example/app:1"


def test_apply_requires_a_field_manager(http: Http) -> None:
    r = http("PATCH", f"{DS}/demo", daemonset(), "application/apply-patch+yaml")
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"


def test_dry_run_does_not_persist(http: Http) -> None:
    r = http.apply(f"{DS}/demo", daemonset(), dryRun="All")
    assert r.status_code == 201
    assert http("GET", f"{DS}/demo").status_code == 404


# -- patches
def test_strategic_merge_patch_merges_containers_by_name(http: Http) -> None:
    http.apply(f"{DS}/demo", daemonset())
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "example/side:1"}]}}}}
    r = http("PATCH", f"{DS}/demo", patch, "application/strategic-merge-patch+json")
    names = [c["name"] for c in r.json()["spec"]["template"]["spec"]["containers"]]
    assert names == ["main", "side"]
    delete = {"spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}}
    r = http("PATCH", f"{DS}/demo", delete, "application/strategic-merge-patch+json")
    assert [c["name"] for c in r.json()["spec"]["template"]["spec"]["containers"]] == ["main"]


def test_json_merge_patch_replaces_lists_and_null_deletes(http: Http) -> None:
    http.apply(f"{DS}/demo", daemonset())
    patch = {"metadata": {"labels": {"a": "1"}},
             "spec": {"template": {"spec": {"containers": [{"name": "other", "image": "example/other:1"}]}}}}
    r = http("PATCH", f"{DS}/demo", patch, "application/merge-patch+json").json()
    assert [c["name"] for c in r["spec"]["template"]["spec"]["containers"]] == ["other"]
    r = http("PATCH", f"{DS}/demo", {"metadata": {"labels": {"a": None}}}, "application/merge-patch+json").json()
    assert "a" not in (r["metadata"].get("labels") or {})


def test_unsupported_patch_type_is_415(http: Http) -> None:
    http.apply(f"{DS}/demo", daemonset())
    r = http("PATCH", f"{DS}/demo", {"spec": {}}, "application/json")
    assert r.status_code == 415 and r.json()["reason"] == "UnsupportedMediaType"


# -- selectors
@pytest.mark.parametrize(("selector", "names"), [
    ("kubernetes.io/hostname=stor1.lab.local", ["stor1.lab.local"]),
    ("kubernetes.io/hostname==stor2.lab.local", ["stor2.lab.local"]),
    ("kubernetes.io/hostname!=stor1.lab.local", ["infra1.lab.local", "stor2.lab.local"]),
    ("kubernetes.io/hostname in (stor1.lab.local, infra1.lab.local)", ["infra1.lab.local", "stor1.lab.local"]),
    ("kubernetes.io/hostname notin (stor1.lab.local)", ["infra1.lab.local", "stor2.lab.local"]),
    ("gpu", ["stor1.lab.local"]),
    ("!gpu", ["infra1.lab.local", "stor2.lab.local"]),
    ("gpu=yes,kubernetes.io/os=linux", ["stor1.lab.local"]),
])
def test_label_selectors_on_lists(http: Http, selector: str, names: list[str]) -> None:
    http.apply(NODE, node_labels({"gpu": "yes"}))
    r = http("GET", "/api/v1/nodes", labelSelector=selector)
    assert r.json()["kind"] == "NodeList"
    assert sorted(i["metadata"]["name"] for i in r.json()["items"]) == names


def test_list_items_carry_no_kind(http: Http) -> None:
    item = http("GET", "/api/v1/nodes").json()["items"][0]
    assert "kind" not in item and "apiVersion" not in item


def test_field_selectors_on_lists(http: Http) -> None:
    r = http("GET", "/api/v1/nodes", fieldSelector="metadata.name=infra1.lab.local")
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["infra1.lab.local"]
    r = http("GET", "/api/v1/namespaces/kube-system/pods", fieldSelector="spec.nodeName=stor1.lab.local")
    assert r.status_code == 200


def test_unknown_field_selector_is_400(http: Http) -> None:
    r = http("GET", "/api/v1/pods", fieldSelector="spec.image=x")
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest" and "not a known field selector" in r.json()[
        "message"]


# -- status and log subresources
def test_main_endpoint_ignores_status_and_status_endpoint_changes_only_status(http: Http) -> None:
    before = http("GET", NODE).json()
    r = http("PATCH", NODE, {"status": {"capacity": {"nvidia.com/gpu": "8"}}}, "application/merge-patch+json")
    assert "nvidia.com/gpu" not in r.json()["status"]["capacity"]
    both = {"metadata": {"labels": {"x": "y"}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}
    r = http("PATCH", NODE + "/status", both, "application/merge-patch+json")
    assert r.json()["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert "x" not in r.json()["metadata"]["labels"]
    assert before["metadata"]["resourceVersion"] != r.json()["metadata"]["resourceVersion"]


def test_log_subresource_is_plain_text_and_400_while_waiting(http: Http, emulator) -> None:
    emulator.cluster.tick = 0.05
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "va", "namespace": "default"},
           "spec": {"restartPolicy": "Never", "nodeName": "stor1.lab.local",
                    "containers": [{"name": "va", "image": "registry.k8s.io/cuda-vector-add:v0.1"}]}}
    # Before the kubelet starts it, the log is a 400 saying what it waits for.
    created = http("POST", "/api/v1/namespaces/default/pods", pod)
    assert created.status_code == 201 and created.json()["status"]["phase"] == "Pending"
    early = http("GET", "/api/v1/namespaces/default/pods/va/log")
    assert early.status_code == 400 and "is waiting to start" in early.json()["message"]
    eventually(lambda: http("GET", "/api/v1/namespaces/default/pods/va").json()["status"]["phase"] == "Succeeded")
    r = http("GET", "/api/v1/namespaces/default/pods/va/log")
    assert r.headers["Content-Type"].startswith("text/plain")
    assert "Test PASSED" in r.text
    assert http("GET", "/api/v1/namespaces/default/pods/va/log", tailLines="1").text.rstrip().endswith("Done")


# -- errors in the Status format
def _is_status(r, code: int, reason: str) -> dict:
    body = r.json()
    assert r.status_code == code
    assert (body["kind"], body["apiVersion"], body["status"], body["reason"], body["code"]) == (
        "Status", "v1", "Failure", reason, code)
    return body


def test_404_for_a_missing_object(http: Http) -> None:
    body = _is_status(http("GET", f"{DS}/nope"), 404, "NotFound")
    assert body["message"] == 'daemonsets.apps "nope" not found' and body["details"]["name"] == "nope"


def test_409_already_exists_on_second_create(http: Http) -> None:
    http("POST", DS, daemonset()).raise_for_status()
    body = _is_status(http("POST", DS, daemonset()), 409, "AlreadyExists")
    assert body["message"] == 'daemonsets.apps "demo" already exists'


def test_409_conflict_on_a_stale_resource_version(http: Http) -> None:
    obj = http("POST", CM, config_map({"a": "1"})).json()
    http("PATCH", f"{CM}/cm", {"data": {"a": "2"}}, "application/merge-patch+json").raise_for_status()
    obj["data"]["a"] = "3"
    body = _is_status(http("PUT", f"{CM}/cm", obj), 409, "Conflict")
    assert "the object has been modified" in body["message"]


def test_422_invalid_name_and_selector_mismatch(http: Http) -> None:
    bad = daemonset("Bad_Name")
    body = _is_status(http("POST", DS, bad), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    mismatch = daemonset()
    mismatch["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    body = _is_status(http("POST", DS, mismatch), 422, "Invalid")
    assert "`selector` does not match template `labels`" in body["message"]


def test_403_forbidden_names_user_verb_and_resource(http: Http) -> None:
    http.faults("forbidden")
    body = _is_status(http("GET", "/api/v1/nodes"), 403, "Forbidden")
    assert 'cannot list resource "nodes"' in body["message"]
    assert http("GET", "/api").status_code == 200  # discovery stays open, as for any authenticated user


def test_401_without_the_token(http: Http, emulator) -> None:
    r = Http(emulator.url, "wrong-token")("GET", "/api/v1/nodes")
    _is_status(r, 401, "Unauthorized")


def test_503_while_unavailable_then_recovers(http: Http) -> None:
    http.faults("unavailable=2")
    assert http("GET", "/api/v1/nodes").status_code == 503
    _is_status(http("GET", "/api/v1/nodes"), 503, "ServiceUnavailable")
    assert http("GET", "/api/v1/nodes").status_code == 200


def test_create_in_a_missing_namespace_is_404(http: Http) -> None:
    body = _is_status(http("POST", "/api/v1/namespaces/nowhere/serviceaccounts",
                           {"metadata": {"name": "sa"}}), 404, "NotFound")
    assert body["message"] == 'namespaces "nowhere" not found'


# -- discovery
def test_discovery_lists_groups_and_resources(http: Http) -> None:
    groups = {g["name"] for g in http("GET", "/apis").json()["groups"]}
    assert {"apps", "rbac.authorization.k8s.io", "scheduling.k8s.io"} <= groups
    assert "security.openshift.io" not in groups  # only when emulating OpenShift
    names = {r["name"] for r in http("GET", "/api/v1").json()["resources"]}
    assert {"pods", "pods/log", "pods/status", "nodes", "nodes/status", "events"} <= names


# -- the simulated cluster behind the API
def _plugin_ds(tolerate: bool) -> dict:
    ds = daemonset("dp", {"gpu": "yes"}, image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0")
    if tolerate:
        ds["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                          "effect": "NoSchedule"}]
    return ds


def _gpu_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "registry.k8s.io/cuda-vector-add:v0.1",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_daemonset_pods_land_only_on_selected_nodes_whose_taints_they_tolerate(http: Http) -> None:
    http.apply(NODE, node_labels({"gpu": "yes"}))
    http.apply(f"{DS}/dp", _plugin_ds(tolerate=False))
    status = eventually(lambda: http("GET", f"{DS}/dp").json().get("status", {}).get("observedGeneration"))
    assert status and http("GET", f"{DS}/dp").json()["status"]["desiredNumberScheduled"] == 0  # GPU taint
    http.apply(f"{DS}/dp", _plugin_ds(tolerate=True))
    eventually(lambda: http("GET", f"{DS}/dp").json()["status"].get("numberReady") == 1, what="plugin ready")
    pods = http("GET", "/api/v1/namespaces/kube-system/pods", labelSelector="app=dp").json()["items"]
    assert [p["spec"]["nodeName"] for p in pods] == ["stor1.lab.local"]


def test_gpus_are_advertised_only_once_a_plugin_runs_and_the_scheduler_counts_them(http: Http) -> None:
    assert "nvidia.com/gpu" not in http("GET", NODE).json()["status"]["capacity"]
    http("POST", "/api/v1/namespaces/default/pods", _gpu_pod("early")).raise_for_status()
    message = eventually(lambda: (http("GET", "/api/v1/namespaces/default/pods/early").json()["status"]
                                  .get("conditions") or [{}])[0].get("message"), what="Unschedulable")
    assert message.startswith("0/3 nodes are available:") and "Insufficient nvidia.com/gpu" in message
    http.apply(NODE, node_labels({"gpu": "yes"}))
    http.apply(f"{DS}/dp", _plugin_ds(tolerate=True))
    eventually(lambda: http("GET", NODE).json()["status"]["allocatable"].get("nvidia.com/gpu") == "1",
               what="GPU advertised")
    eventually(lambda: http("GET", "/api/v1/namespaces/default/pods/early").json()["status"]["phase"] == "Succeeded",
               what="the waiting pod runs once a GPU is allocatable")
