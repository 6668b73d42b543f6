"""``gpuready validate cluster``: the seed-002 checks of a Kubernetes/OpenShift GPU cluster, per node.

For each GPU node: the device-plugin pod is Running and Ready, its log says it registered
with the kubelet, Capacity and Allocatable ``nvidia.com/gpu`` equal the inventory's count, and
a cuda-vector-add pod pinned to the node (by the Node object's own hostname label, else its name) Succeeds and
logs ``Test PASSED``; where the NVIDIA runtime is offered through a RuntimeClass, the pod names it. Nodes without
GPUs must advertise none. Test pods are removed afterwards, whatever happens.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuready.core import role_defaults
from gpuready.core.command import Context, common_options, execute, limit_option
from gpuready.core.errors import GpureadyError
from gpuready.core.report.metrics import metrics_option
from gpuready.core.results import ERROR, FAILED, Check, RunResult
from gpuready.core.verdict import Verdict, blocks

if TYPE_CHECKING:
    from collections.abc import Callable

    #: Judges one ended (or timed out) pod, ``((host, pod), events=...)``, into the host's checks.
    Judge = Callable[..., list[Check]]

    from gpuready.core.platforms.kube import Kube
    from gpuready.core.settings import Kubernetes

GPU = "nvidia.com/gpu"
#: The well-known label the kubelet sets from the node's hostname (Kubernetes "Well-Known Labels"); it can differ
#: from the node's name (--hostname-override, cloud providers), and from the inventory's name for the host.
HOSTNAME_LABEL = "kubernetes.io/hostname"
PLUGIN_SELECTOR = role_defaults.device_plugin_pod_selector()
TEST_LABEL = "gpuready.io/test"
REGISTERED = "Registered device plugin"
#: Wait at least this many times as long as the last LIST of the test pods took before the next one.
LIST_PACE = 3
#: Test pods deleted per DELETECOLLECTION request. The API server ends an ordinary request after its
#: --request-timeout, 60 s by default (kube-apiserver reference, "--request-timeout duration Default: 1m0s"),
#: and deletes a collection's items one after another (--delete-collection-workers, default 1): 1000 pods in one
#: request ran past it on the lab's loaded API server, and the pod-by-pod fallback then sent 1000 DELETEs. Parts
#: of this size, sent side by side, each end well inside the limit.
DELETE_BATCH = 100
APISERVER_REQUEST_TIMEOUT_S = 60
#: The label that puts a test pod in its part for deletion.
PART_LABEL = "gpuready.io/run-part"
#: A failed test pod read alone lists its own events; more in one round read the namespace's pod events in one LIST.
EVENTS_ONE_BY_ONE = 1
# The Dell/Red Hat TFJobs paper: "permission denied" means wrong SELinux labels; these are the labels it
# requires (the policy's own device label and the gpu_selinux role's rules), and container-selinux's boolean that
# lets containers open the GPU devices.
SELINUX_REMEDY = (
    "SELinux labels are wrong on the node: "
    + ", ".join(
        f"{c['path']} must be {c['setype']}"
        for c in [*role_defaults.selinux_policy_labels(), *role_defaults.selinux_file_contexts()]
    )
    + ", and the first of the booleans "
    + ", ".join(role_defaults.selinux_device_booleans())
    + " that the node's container-selinux has on; run `gpuready provision cluster --tags selinux` "
    "(or semanage fcontext + restorecon, setsebool -P)"
)


@click.command("cluster")
@common_options
@metrics_option
@limit_option
def cluster(inventory_path: Path, artifacts: Path | None, verbose: int, limit: str | None) -> None:
    """Check the device plugin, advertised GPUs and a cuda-vector-add pod on every GPU node."""
    execute(Context("validate cluster", inventory_path, artifacts, verbose, {"limit": limit}), _validate)


def _validate(ctx: Context) -> RunResult:
    from gpuready.core.platforms import kube

    inv = ctx.inventory
    settings = inv.settings.kubernetes
    gpu_nodes = inv.limit(ctx.options["limit"], "gpu_nodes") if inv.hosts("gpu_nodes") else []
    expected = {host: inv.node_class(host).gpu_count for host in gpu_nodes}
    result = ctx.new_result()
    try:
        return _run_checks(ctx, kube.connect(settings), settings, gpu_nodes, expected, result)
    except GpureadyError as e:
        e.partial = result  # type: ignore[attr-defined]  # what finished before the API went away is still written
        raise


def _run_checks(
    ctx: Context, client: Kube, settings: Kubernetes, gpu_nodes: list[str], expected: dict[str, int], result: RunResult
) -> RunResult:
    ctx.note(
        f"validate cluster: {client.server} ({settings.flavour}), {len(gpu_nodes)} GPU node(s)"
        f" — artifacts in {ctx.run_dir}"
    )
    nodes = {n.metadata.name: n for n in client.items(client.core.list_node, "list nodes")}
    plugin_pods = client.items(
        partial(client.core.list_namespaced_pod, settings.device_plugin.namespace, label_selector=PLUGIN_SELECTOR),
        "list the device-plugin pods",
    )
    by_node: dict[str, Any] = {}
    for pod in plugin_pods:
        by_node.setdefault(pod.spec.node_name, pod)
    # A test pod can run where the node advertises its GPUs: known from the node list alone, so the pods are
    # created first and the cluster schedules and runs them while the plugin logs are read.
    advertised = {host: _advertised(host, nodes[host], expected[host]) for host in gpu_nodes if host in nodes}
    record_gpus(result, nodes, expected)
    runnable = [host for host, checks in advertised.items() if all(c.status == "passed" for c in checks)]
    #: Each GPU node's plugin pod verdict, the root cause the plugin log's check defers to.
    plugin: dict[str, Check] = {}

    def node_checks(host: str) -> list[Any]:
        """What the node list and the plugin pod's status show (requests only for a plugin pod that failed)."""
        node = nodes.get(host)
        if node is None:
            named = Verdict(
                "cluster.node", host, "the inventory host name of a GPU node must be its Kubernetes node name"
            )
            return [named.failed("no Kubernetes node of this name", f"nodes: {', '.join(sorted(nodes))}")]
        plugin[host] = _plugin_pod(client, settings, host, by_node.get(host))
        checks = root_causes([plugin[host], *advertised[host]])
        if host in runnable:
            return checks
        return [*checks, Verdict("cluster.cuda_vector_add", host).depends_on(next(c for c in checks if blocks(c)))]

    # Written before the test pods exist, so a Ctrl-C while they run still reports them.
    for checks in client.each(node_checks, gpu_nodes):
        result.add(*checks)
    if not ctx.options["limit"]:
        for name, node in sorted(nodes.items()):
            if name not in expected:
                result.add(_no_gpus(name, node))

    def while_pods_run() -> None:
        # One log read per node: in parallel, so 1000 nodes are not 1000 round trips one after another.
        logged = [host for host in gpu_nodes if host in nodes]
        result.add(*client.each(lambda host: _plugin_log(client, settings, host, by_node.get(host), plugin), logged))
        if settings.flavour == "openshift":
            result.add(_scc(client, settings))

    try:
        result.add(*_vector_add(ctx, client, settings, runnable, nodes, while_pods_run))
    except KeyboardInterrupt:
        from gpuready.core import cancel

        why = f"{cancel.reason()} before the test pod finished (the pod was deleted)"
        result.add(*(Verdict("cluster.cuda_vector_add", host).errored(why) for host in runnable))
        raise
    return result


def _plugin_pod(client: Kube, settings: Kubernetes, host: str, pod: Any) -> Check:
    v = Verdict("cluster.device_plugin.pod", host)
    if pod is None:
        return v.failed(
            "no device-plugin pod on this node",
            f"label selector {PLUGIN_SELECTOR} in {settings.device_plugin.namespace}",
            "run `gpuready provision cluster --tags kubernetes` (it labels the node and deploys the plugin)",
        )
    ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
    if pod.status.phase == "Running" and ready:
        return v.passed(f"{pod.metadata.name} Running and Ready")
    evidence = _pod_evidence(client, pod)
    return v.failed(
        f"{pod.metadata.name} {pod.status.phase}, not Ready: {_container_states(pod)}",
        evidence,
        _remedy(
            evidence,
            "the plugin cannot start: check the NVIDIA driver and the container "
            "runtime hook on the node (`gpuready validate gpu-node`)",
        ),
    )


def root_causes(chain: list[Check]) -> list[Check]:
    """``chain``'s checks, each depending on the ones before: a failure after one that did not pass is the same
    root cause, so it is skipped naming it (as the node checks do), never failed again with a remedy for what
    cannot be there yet. A pass stays a pass: what a node shows is not hidden."""
    out: list[Check] = []
    for check in chain:
        root = next((c for c in out if blocks(c)), None)
        if root is not None and check.status in (FAILED, ERROR):
            check = Verdict(check.id, check.host).depends_on(root)
        out.append(check)
    return out


def _plugin_log(client: Kube, settings: Kubernetes, host: str, pod: Any, plugin: dict[str, Check]) -> Check:
    v = Verdict("cluster.device_plugin.registered", host)
    if pod is None:
        return v.depends_on(plugin[host]) if host in plugin else v.skipped("no device-plugin pod to read")
    log = _log(client, pod)
    if host in plugin and blocks(plugin[host]):  # a pod that is not Ready: the same cause, its log says why
        return v.depends_on(plugin[host], log[-2000:] or "(empty log)")
    if REGISTERED in log and "with Kubelet" in log:
        line = next(line for line in log.splitlines() if REGISTERED in line)
        return v.passed("the plugin registered with the kubelet", line.strip())
    return v.failed(
        "the plugin's log shows no registration with the kubelet",
        log[-2000:] or "(empty log)",
        _remedy(
            log,
            "see the plugin log: NVML must load (driver installed) and the kubelet's "
            f"{role_defaults.kubelet_device_plugins_dir()} must be writable",
        ),
    )


def record_gpus(result: RunResult, nodes: dict[str, Any], expected: dict[str, int]) -> None:
    """The GPUs each node advertises (capacity, allocatable) beside the count its node class expects."""
    from gpuready.core import figures

    for host, want in expected.items():
        if host in nodes:
            for field in ("capacity", "allocatable"):
                have = int((getattr(nodes[host].status, field) or {}).get(GPU, "0"))
                figures.record(result, "kubernetes_node_gpus", "GPUs", have, host=host, field=field)
        figures.record(result, "kubernetes_node_expected_gpus", "GPUs", want, host=host)


def _advertised(host: str, node: Any, want: int) -> list[Check]:
    unusable = (
        "a GPU the plugin cannot use is not allocatable: check the plugin log and `nvidia-smi` on the node; "
        "fix gpu_count in the node class if it is wrong"
    )
    checks = []
    for field in ("capacity", "allocatable"):
        have = int((getattr(node.status, field) or {}).get(GPU, "0"))
        v = Verdict(f"cluster.gpu.{field}", host, unusable)
        if have == want:
            checks.append(v.passed(f"{GPU}: {have}"))
        else:
            status = node.status
            evidence = f"capacity {status.capacity.get(GPU, 'none')}, allocatable {status.allocatable.get(GPU, 'none')}"
            checks.append(v.failed(f"{field.capitalize()} {GPU} is {have}, the inventory says {want}", evidence))
    return checks


def _no_gpus(name: str, node: Any) -> Check:
    have = int((node.status.capacity or {}).get(GPU, "0"))
    return Verdict("cluster.gpu.none", name, "add the node to gpu_nodes, or remove the GPU label from it").passed_if(
        have == 0,
        f"not a GPU node in the inventory, advertises no {GPU}",
        f"not in the inventory's gpu_nodes but advertises {GPU}: {have}",
    )


def _scc(client: Kube, settings: Kubernetes) -> Check:
    """The SCC exists and the API server's own RBAC lets the plugin's service account `use` it in its project."""
    from kubernetes import client as k8s

    from gpuready.core.platforms import kube

    name = role_defaults.device_plugin_scc()
    namespace = settings.device_plugin.namespace
    user = f"system:serviceaccount:{namespace}:{role_defaults.device_plugin_service_account()}"
    dynamic = client.dynamic()
    api = client.call(
        lambda: dynamic.resources.get(api_version="security.openshift.io/v1", kind="SecurityContextConstraints"),
        "find SCCs",
    )
    v = Verdict("cluster.openshift.scc", "cluster", "run `gpuready provision cluster --tags kubernetes`")
    try:
        client.call(lambda: api.get(name=name), f"read SCC {name}")
    except kube.NotFound:
        return v.failed(f"SecurityContextConstraints {name} not found")
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    use = k8s.V1ResourceAttributes(
        group="security.openshift.io", resource="securitycontextconstraints", name=name, verb="use", namespace=namespace
    )
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(user=user, groups=groups, resource_attributes=use)
    )
    authz = k8s.AuthorizationV1Api(client.api_client)
    answer = client.call(lambda: authz.create_subject_access_review(review), f"ask whether {user} may use SCC {name}")
    status = answer.status or k8s.V1SubjectAccessReviewStatus(allowed=False)
    if status.allowed:
        return v.passed(f"{user} may use SCC {name} in {namespace}", status.reason or "")
    return v.failed(
        f"{user} may not use SCC {name} in {namespace}",
        status.reason or status.evaluation_error or "",
        f"{v.remedy} (it binds the Role of the same name)",
    )


def _vector_add(
    ctx: Context,
    client: Kube,
    settings: Kubernetes,
    hosts: list[str],
    nodes: dict[str, Any],
    meanwhile: Callable[[], None],
) -> list[Any]:
    """Create one cuda-vector-add pod per node at once, run ``meanwhile`` while the cluster runs them, wait for
    all, and always delete them."""
    runtime_class = role_defaults.runtime_class_name() if settings.nvidia_runtime == "runtimeclass" else ""

    def build(host: str, run: str) -> dict[str, Any]:
        labels = nodes[host].metadata.labels or {}
        return cuda_vector_add_pod(
            host, settings.cuda_vector_add_image, run, hostname=labels.get(HOSTNAME_LABEL), runtime_class=runtime_class
        )

    def judge(ended: tuple[str, Any], events: dict[str, list[Any]] | None = None) -> list[Check]:
        return [_verdict(client, settings, ended, events)]

    return pods_per_node(
        client, settings, hosts, build, judge, meanwhile, what="a cuda-vector-add pod", timeout_s=settings.pod_timeout_s
    )


def pods_per_node(
    client: Kube,
    settings: Kubernetes,
    hosts: list[str],
    build: Callable[[str, str], dict[str, Any]],
    judge: Judge,
    meanwhile: Callable[[], None],
    *,
    what: str,
    timeout_s: float,
) -> list[Check]:
    """One pod per host (``build(host, run)``, labelled ``gpuready.io/run=<run>``) in the validation namespace,
    created at once; ``meanwhile`` runs while the cluster runs them; each pod is judged (``judge((host, pod),
    events)``) when it ends or ``timeout_s`` is up; the run's pods are always deleted."""
    if not hosts:
        meanwhile()
        return []
    from gpuready.core.platforms import kube

    namespace = settings.validation_namespace
    run = uuid.uuid4().hex[:8]
    try:
        client.call(lambda: client.core.read_namespace(namespace), f"read namespace {namespace}")
    except kube.NotFound:
        with contextlib.suppress(kube.Conflict):  # created meanwhile by someone else: fine
            from kubernetes.client import V1Namespace

            client.call(
                lambda: client.core.create_namespace(V1Namespace.from_dict({"metadata": {"name": namespace}})),
                f"create namespace {namespace}",
            )
    pods: dict[str, str] = {}

    parts = {host: str(i // DELETE_BATCH) for i, host in enumerate(hosts)}

    def create(host: str) -> None:
        body = build(host, run)
        body["metadata"]["labels"][PART_LABEL] = parts[host]
        created = client.read(
            partial(client.core.create_namespaced_pod, namespace, body), f"create {what} in {namespace}"
        )
        pods[host] = created.metadata.name

    try:
        client.each(create, hosts)
        meanwhile()
        return _wait_for(client, settings, namespace, run, {host: pods[host] for host in hosts}, judge, timeout_s)
    finally:
        _remove_test_pods(client, namespace, run, set(pods.values()), sorted(set(parts.values())))


def _remove_test_pods(client: Kube, namespace: str, run: str, known: set[str], parts: list[str]) -> None:
    """Delete this run's pods (all carry its label, also any created just before a Ctrl-C) with one request per
    part of :data:`DELETE_BATCH` pods, sent side by side; where the user may not delete collections (an older
    grant of kube_rbac.yaml) or a part fails, one by one."""
    import logging

    from gpuready.core.platforms import kube

    selector = f"gpuready.io/run={run}"

    def delete_part(part: str) -> None:
        # The answer lists every deleted pod: read as JSON, not into models.
        client.read(
            partial(
                client.core.delete_collection_namespaced_pod,
                namespace,
                label_selector=f"{selector},{PART_LABEL}={part}",
                grace_period_seconds=0,
                # As long as the API server lets any request run, and a little more for the answer to arrive.
                _request_timeout=(kube.REQUEST_TIMEOUT[0], APISERVER_REQUEST_TIMEOUT_S + 5),
            ),
            f"delete the test pods in {namespace}",
        )

    with contextlib.suppress(Exception):  # then pod by pod, which logs what it cannot delete
        client.each(delete_part, parts)
        return
    names = set(known)
    with contextlib.suppress(Exception):
        names |= {
            p.metadata.name
            for p in client.items(
                partial(client.core.list_namespaced_pod, namespace, label_selector=selector), "list test pods"
            )
        }

    def delete(name: str) -> None:
        try:
            client.read(
                partial(client.core.delete_namespaced_pod, name, namespace, grace_period_seconds=0),
                f"delete test pod {name}",
            )
        except Exception:  # cleanup must not hide the result; a leftover pod is logged
            logging.getLogger(__name__).warning("could not delete test pod %s/%s", namespace, name)

    client.each(delete, sorted(names))


def cuda_vector_add_pod(
    node: str, image: str, run: str, *, hostname: str | None = None, runtime_class: str = ""
) -> dict[str, Any]:
    """The Dell/Red Hat TFJobs paper's cuda-vector-add pod, pinned to one node, one GPU, run once.

    Pinned by the node's ``kubernetes.io/hostname`` label as the Node object carries it (``hostname``), else by the
    node's name through the scheduler (node affinity on ``metadata.name``, as the DaemonSet controller pins its
    pods), so the scheduler still checks the GPU is free. ``runtime_class`` names the RuntimeClass of the NVIDIA
    runtime when it is not the runtime's default (k8s-device-plugin README: GPU pods then set runtimeClassName).
    """
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "cuda-vector-add", "image": image, "resources": {"limits": {GPU: "1"}}}],
    }
    if hostname:
        spec["nodeSelector"] = {HOSTNAME_LABEL: hostname}
    else:
        by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [by_name]}}
        }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "cuda-vector-add-",
            "labels": {
                TEST_LABEL: "cuda-vector-add",
                "gpuready.io/run": run,
                "app.kubernetes.io/managed-by": "gpuready",
            },
        },
        "spec": spec,
    }


def _wait_for(
    client: Kube,
    settings: Kubernetes,
    namespace: str,
    run: str,
    pods: dict[str, str],
    judge: Judge,
    timeout_s: float,
) -> list[Check]:
    """Poll this run's pods with one LIST per round (not one GET per pod), until each ends or time is up."""
    results: list[Check] = []
    deadline = time.monotonic() + timeout_s
    pending = dict(pods)
    while pending:
        round_started = time.monotonic()
        listed = {
            p.metadata.name: p
            for p in client.items(
                partial(client.core.list_namespaced_pod, namespace, label_selector=f"gpuready.io/run={run}"),
                f"list the test pods in {namespace}",
            )
        }
        list_s = time.monotonic() - round_started
        ended = []
        for host, name in list(pending.items()):
            pod = listed.get(name)
            if pod is None:  # deleted by someone else: read it to report the 404 the usual way
                pod = client.read(partial(client.core.read_namespaced_pod, name, namespace), f"read pod {name}")
            if pod.status.phase in ("Succeeded", "Failed") or time.monotonic() > deadline:
                ended.append((host, pod))
                del pending[host]
        # Pods that did not pass are reported with their events: for many at once, one LIST of the namespace's
        # pod events instead of one per pod (each of which scans the namespace's events on the server).
        failing = [pod for _, pod in ended if pod.status.phase != "Succeeded"]
        events = _events_by_pod(client, namespace) if len(failing) > EVENTS_ONE_BY_ONE else None
        # Each verdict reads the pod's log: in parallel, as the node checks do.
        for checks in client.each(partial(judge, events=events), ended):
            results += checks
        if pending:
            # A LIST of 1000 pods costs the API server and gpuready a few tenths of a second each: poll no
            # more often than that pace allows, so polling stays a small share of the machine.
            time.sleep(max(settings.poll_interval_s, LIST_PACE * list_s))
    return sorted(results, key=lambda c: c.host)


def _verdict(
    client: Kube, settings: Kubernetes, ended: tuple[str, Any], events: dict[str, list[Any]] | None = None
) -> Check:
    """The verdict on one node's test pod, ``ended`` as (host, pod)."""
    host, pod = ended
    v = Verdict("cluster.cuda_vector_add", host)
    log = _log(client, pod) if pod.status.phase in ("Succeeded", "Failed", "Running") else ""
    if pod.status.phase == "Succeeded" and "Test PASSED" in log:
        return v.passed(f"{pod.metadata.name} Succeeded: Test PASSED", log.strip())
    evidence = _pod_evidence(client, pod, log, events)
    if pod.status.phase in ("Succeeded", "Failed"):
        message = f"{pod.metadata.name} {pod.status.phase}: {_container_states(pod)}"
        if pod.status.phase == "Succeeded":
            message += "; no 'Test PASSED' in its log"
        elif log.strip():
            message += f"; log: {log.strip().splitlines()[-1]}"
    else:
        message = f"{pod.metadata.name} still {pod.status.phase} after {settings.pod_timeout_s}s: {_why_pending(pod)}"
    return v.failed(message, evidence, _remedy(evidence, "see the evidence: the pod's status, events and log"))


def _log(client: Kube, pod: Any) -> str:
    from gpuready.core.platforms import kube

    try:
        return client.text(
            partial(client.core.read_namespaced_pod_log, pod.metadata.name, pod.metadata.namespace),
            f"read the log of {pod.metadata.name}",
        )
    except (kube.NotFound, kube.BadRequest):  # a pod that never started has no log (400); its status says why
        return ""


def _events_by_pod(client: Kube, namespace: str) -> dict[str, list[Any]]:
    by_pod: dict[str, list[Any]] = {}
    for e in client.items(
        partial(client.core.list_namespaced_event, namespace, field_selector="involvedObject.kind=Pod"),
        f"list the pod events in {namespace}",
    ):
        by_pod.setdefault(e.involved_object.name, []).append(e)
    return by_pod


def _events(client: Kube, pod: Any, events: dict[str, list[Any]] | None = None) -> list[str]:
    if events is not None:
        items = list(events.get(pod.metadata.name, []))
    else:
        items = client.items(
            partial(
                client.core.list_namespaced_event,
                pod.metadata.namespace,
                field_selector=f"involvedObject.name={pod.metadata.name}",
            ),
            f"list events of {pod.metadata.name}",
        )
    # resourceVersion is opaque, but etcd-backed servers give numbers: it breaks ties within a second.
    items.sort(
        key=lambda e: (
            str(e.last_timestamp or ""),
            int(e.metadata.resource_version or 0) if str(e.metadata.resource_version or "").isdigit() else 0,
        )
    )
    return [f"{e.type} {e.reason}: {e.message}" for e in items]


def _container_states(pod: Any) -> str:
    states = []
    for c in pod.status.container_statuses or []:
        state = c.state
        if state.waiting:
            text = f"waiting {state.waiting.reason}" + (f" ({state.waiting.message})" if state.waiting.message else "")
        elif state.terminated:
            t = state.terminated
            text = f"terminated {t.reason} exit {t.exit_code}" + (f" ({t.message})" if t.message else "")
        else:
            text = "running"
        states.append(f"{c.name} {text}, restarts {c.restart_count}")
    return "; ".join(states) or _why_pending(pod)


def _why_pending(pod: Any) -> str:
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False":
            return f"{c.reason}: {c.message}"
    return "no container status yet"


def _pod_evidence(client: Kube, pod: Any, log: str | None = None, events: dict[str, list[Any]] | None = None) -> str:
    if log is None:
        log = _log(client, pod)
    lines = _events(client, pod, events)
    return "\n".join(
        [
            f"pod {pod.metadata.namespace}/{pod.metadata.name} on {pod.spec.node_name or '(unscheduled)'}: "
            f"{pod.status.phase}",
            f"containers: {_container_states(pod)}",
            "events:",
            *(f"  {e}" for e in lines[-10:]),
            "log:",
            log[-2000:] or "  (empty)",
        ]
    )


def _remedy(evidence: str, default: str) -> str:
    return SELINUX_REMEDY if "permission denied" in evidence.lower() else default
