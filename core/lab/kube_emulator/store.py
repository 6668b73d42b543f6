"""The emulator's object store: the resources it serves and what the API server does on each write.

Every write goes through here: identity and bookkeeping (uid, resourceVersion, generation,
managedFields), the validation a real server refuses with 422, conflicts (409), and the
rule that a resource with a status subresource ignores status on its main endpoint.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import re
import uuid
from dataclasses import dataclass
from typing import Any

from gpuready.lab.kube_emulator import merge


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
KUBERNETES = [
    Resource("", "v1", "namespaces", "Namespace", False, ("status",), ("ns",)),
    Resource("", "v1", "nodes", "Node", False, ("status",), ("no",)),
    Resource("", "v1", "pods", "Pod", True, ("status", "log"), ("po",)),
    Resource("", "v1", "events", "Event", True, (), ("ev",)),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, (), ("sa",)),
    Resource("", "v1", "configmaps", "ConfigMap", True, (), ("cm",)),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, ("status",), ("ds",)),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, (), ("pc",)),
]
OPENSHIFT = [
    Resource("security.openshift.io", "v1", "securitycontextconstraints", "SecurityContextConstraints", False,
             (), ("scc",)),
]
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ApiError(Exception):
    """Answered as a Status object with this code and reason."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict[str, Any]:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found',
                    {"name": name, "group": res.group, "kind": res.plural})


def invalid(res: Resource, name: str, causes: list[tuple[str, str]]) -> ApiError:
    text = ", ".join(f"{field}: {why}" for field, why in causes)
    return ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: {text}',
                    {"name": name, "group": res.group, "kind": res.kind,
                     "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}
                                for field, why in causes]})


class Store:
    def __init__(self, openshift: bool = False) -> None:
        self.resources = KUBERNETES + (OPENSHIFT if openshift else [])
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (plural key, namespace, name)
        self.managed: dict[tuple[str, str, str], dict[tuple[str, str], set[merge.Path]]] = {}
        self._rv = itertools.count(1000)
        self.logs: dict[tuple[str, str, str], str] = {}  # (namespace, pod, container) -> log text

    # -- lookup
    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        return next((r for r in self.resources if (r.group, r.version, r.plural) == (group, version, plural)), None)

    def by_kind(self, kind: str) -> Resource:
        return next(r for r in self.resources if r.kind == kind)

    @staticmethod
    def _key(res: Resource, namespace: str | None, name: str) -> tuple[str, str, str]:
        return (f"{res.group}/{res.plural}", namespace or "", name)

    def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.objects.get(self._key(res, namespace, name))
        if obj is None:
            raise not_found(res, name)
        return copy.deepcopy(obj)

    def find(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        obj = self.objects.get(self._key(res, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, res: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        prefix = f"{res.group}/{res.plural}"
        return [copy.deepcopy(o) for (k, ns, _), o in sorted(self.objects.items())
                if k == prefix and (namespace is None or ns == namespace)]

    @property
    def resource_version(self) -> str:
        return str(next(self._rv))

    # -- writes
    def create(self, res: Resource, namespace: str | None, obj: dict[str, Any], manager: str = "",
               dry_run: bool = False) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        self._check_kind(res, obj)
        namespace = self._check_namespace(res, namespace, meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        self._validate(res, obj, None)
        key = self._key(res, namespace, meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{res.plural}{"." + res.group if res.group else ""} '
                           f'"{meta["name"]}" already exists', {"name": meta["name"], "group": res.group,
                                                                 "kind": res.plural})
        if namespace and res.plural != "namespaces" and self.find(self.by_kind("Namespace"), None, namespace) is None:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                           {"name": namespace, "kind": "namespaces"})
        if "status" in res.subresources and res.kind != "Node":
            obj.pop("status", None)  # a client cannot set status when creating; the controllers do
        self._defaults(res, obj)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now())
        if res.kind not in ("Pod", "Event"):
            meta["generation"] = 1
        ownership = {(manager or "unknown", "Update"): merge.owned_paths(obj)}
        return self._store(res, key, obj, ownership, dry_run)

    def update(self, res: Resource, namespace: str | None, name: str, obj: dict[str, Any], manager: str = "",
               subresource: str = "", dry_run: bool = False) -> dict[str, Any]:
        current = self.get(res, namespace, name)
        obj = copy.deepcopy(obj)
        self._check_kind(res, obj)
        sent_rv = (obj.get("metadata") or {}).get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res.plural}'
                           f'{"." + res.group if res.group else ""} "{name}": the object has been modified; '
                           f'please apply your changes to the latest version and try again',
                           {"name": name, "group": res.group, "kind": res.plural})
        return self._replace(res, current, obj, manager or "unknown", "Update", subresource, dry_run)

    def patch(self, res: Resource, namespace: str | None, name: str, patch: Any, kind: str, manager: str = "",
              subresource: str = "", dry_run: bool = False) -> dict[str, Any]:
        current = self.get(res, namespace, name)
        if kind == "merge":
            new = merge.json_merge_patch(current, patch)
        elif kind == "strategic":
            new = merge.strategic_merge_patch(current, patch)
        else:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                           "accepted media types include: application/json-patch+json, "
                           "application/merge-patch+json, application/apply-patch+yaml")
        return self._replace(res, current, new, manager or "unknown", "Update", subresource, dry_run)

    def apply(self, res: Resource, namespace: str | None, name: str, config: dict[str, Any], manager: str,
              force: bool, subresource: str = "", dry_run: bool = False) -> dict[str, Any]:
        if not manager:
            raise ApiError(400, "BadRequest", "PATCH /apply: fieldManager is required for apply requests")
        config = copy.deepcopy(config)
        self._check_kind(res, config)
        meta = config.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        meta["name"] = name
        namespace = self._check_namespace(res, namespace, meta) if res.namespaced else None
        key = self._key(res, namespace, name)
        current = self.objects.get(key)
        if "status" in res.subresources and subresource != "status":
            config.pop("status", None)
        try:
            new, ownership = merge.server_side_apply(current, config, manager, force, self.managed.get(key, {}))
        except merge.ApplyConflict as e:
            fields = [".".join(p) for _, p in e.conflicts]
            managers = sorted({m for m, _ in e.conflicts})
            raise ApiError(409, "Conflict", f"Apply failed with {len(fields)} conflict(s): conflict with "
                           f'"{", ".join(managers)}": {", ".join(fields)}',
                           {"causes": [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}"',
                                        "field": ".".join(p)} for m, p in e.conflicts]}) from e
        if current is None:
            if res.namespaced and self.find(self.by_kind("Namespace"), None, namespace or "") is None:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                               {"name": namespace, "kind": "namespaces"})
            self._validate(res, new, None)
            self._defaults(res, new)
            new["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=now())
            if res.kind not in ("Pod", "Event"):
                new["metadata"]["generation"] = 1
            return self._store(res, key, new, ownership, dry_run)
        return self._commit(res, key, current, new, ownership, dry_run)

    def delete(self, res: Resource, namespace: str | None, name: str, dry_run: bool = False) -> dict[str, Any]:
        obj = self.get(res, namespace, name)
        if not dry_run:
            key = self._key(res, namespace, name)
            del self.objects[key]
            self.managed.pop(key, None)
            if res.kind == "Pod":
                for log_key in [k for k in self.logs if k[:2] == (namespace, name)]:
                    del self.logs[log_key]
            if res.kind == "Namespace":
                for other in [k for k in self.objects if k[1] == name]:
                    del self.objects[other]
        return obj

    def set_status(self, res: Resource, namespace: str | None, name: str, status: dict[str, Any],
                   manager: str = "gpuready-emulator") -> dict[str, Any]:
        """What the emulated controllers use (as a kubelet or controller would PUT .../status)."""
        current = self.get(res, namespace, name)
        new = copy.deepcopy(current)
        new["status"] = status
        return self._commit(res, self._key(res, namespace, name), current, new,
                            self._owners_after(current, new, manager, self._key(res, namespace, name)), False)

    # -- internals
    def _replace(self, res: Resource, current: dict[str, Any], new: dict[str, Any], manager: str, op: str,
                 subresource: str, dry_run: bool) -> dict[str, Any]:
        meta = new.setdefault("metadata", {})
        if meta.get("name", current["metadata"]["name"]) != current["metadata"]["name"]:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        for field in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]
        if "status" in res.subresources:
            if subresource == "status":  # only status may change through .../status
                new = {**copy.deepcopy(current), "status": new.get("status", {})}
            else:  # and status never changes through the main endpoint
                new["status"] = copy.deepcopy(current.get("status"))
                if new["status"] is None:
                    new.pop("status")
        self._validate(res, new, current)
        key = self._key(res, current["metadata"].get("namespace"), current["metadata"]["name"])
        return self._commit(res, key, current, new, self._owners_after(current, new, manager, key, op), dry_run)

    def _owners_after(self, current: dict[str, Any], new: dict[str, Any], manager: str, key: tuple[str, str, str],
                      op: str = "Update") -> dict[tuple[str, str], set[merge.Path]]:
        changed = {p for p in merge.diff_paths(current, new) if p not in merge.UNOWNED}
        owners = {k: set(v) for k, v in self.managed.get(key, {}).items()}
        for paths in owners.values():
            paths -= changed  # an update takes the fields it changes away from their owners
        owners.setdefault((manager, op), set()).update(p for p in changed if merge.get_path(new, p)
                                                       is not merge._MISSING)
        return {k: v for k, v in owners.items() if v}

    def _commit(self, res: Resource, key: tuple[str, str, str], current: dict[str, Any], new: dict[str, Any],
                ownership: dict[tuple[str, str], set[merge.Path]], dry_run: bool) -> dict[str, Any]:
        strip = ("resourceVersion", "managedFields")
        before = {**current, "metadata": {k: v for k, v in current["metadata"].items() if k not in strip}}
        after = {**new, "metadata": {k: v for k, v in new["metadata"].items() if k not in strip}}
        if before == after:
            return copy.deepcopy(current)  # no change: same resourceVersion, nothing written
        self._validate(res, new, current)
        spec_changed = {k: v for k, v in before.items() if k not in ("metadata", "status")} != \
            {k: v for k, v in after.items() if k not in ("metadata", "status")}
        if spec_changed and "generation" in current["metadata"]:
            new["metadata"]["generation"] = current["metadata"]["generation"] + 1
        return self._store(res, key, new, ownership, dry_run, previous=current)

    def _store(self, res: Resource, key: tuple[str, str, str], obj: dict[str, Any],
               ownership: dict[tuple[str, str], set[merge.Path]], dry_run: bool,
               previous: dict[str, Any] | None = None) -> dict[str, Any]:
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta = obj["metadata"]
        old_fields = {(m["manager"], m["operation"]): m for m in (previous or {}).get("metadata", {})
                      .get("managedFields", [])}
        stamp = now()
        meta["managedFields"] = [
            {"manager": m, "operation": op, "apiVersion": res.api_version,
             "time": old_fields[(m, op)]["time"] if (m, op) in old_fields and
             merge.from_fields_v1(old_fields[(m, op)]["fieldsV1"]) == paths else stamp,
             "fieldsType": "FieldsV1", "fieldsV1": merge.to_fields_v1(paths)}
            for (m, op), paths in sorted(ownership.items())]
        if dry_run:
            meta.setdefault("resourceVersion", (previous or {}).get("metadata", {}).get("resourceVersion", ""))
            return copy.deepcopy(obj)
        meta["resourceVersion"] = self.resource_version
        self.objects[key] = obj
        self.managed[key] = ownership
        return copy.deepcopy(obj)

    @staticmethod
    def _check_kind(res: Resource, obj: dict[str, Any]) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if (kind and kind != res.kind) or (api_version and api_version != res.api_version):
            raise ApiError(400, "BadRequest", f"the API version in the data ({api_version}) does not match the "
                           f"expected API version ({res.api_version})" if api_version != res.api_version else
                           f"kind {kind} does not match the expected kind {res.kind}")

    @staticmethod
    def _check_namespace(res: Resource, namespace: str | None, meta: dict[str, Any]) -> str | None:
        if not res.namespaced:
            meta.pop("namespace", None)
            return None
        given = meta.get("namespace")
        if given and namespace and given != namespace:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the "
                           "namespace sent on the request")
        meta["namespace"] = namespace or given or "default"
        return meta["namespace"]

    @staticmethod
    def _validate(res: Resource, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        causes: list[tuple[str, str]] = []
        pattern = _DNS_LABEL if res.kind in ("Namespace",) else _DNS_SUBDOMAIN
        if not name:
            causes.append(("metadata.name", "Required value: name or generateName is required"))
        elif res.kind != "Event" and (len(name) > 253 or not pattern.match(name)):
            causes.append(("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 '
                           f'{"label" if pattern is _DNS_LABEL else "subdomain"} must consist of lower case '
                           "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                           "character"))
        if res.kind == "Pod":
            spec = obj.get("spec") or {}
            if not spec.get("containers"):
                causes.append(("spec.containers", "Required value"))
            if old is not None and {k: v for k, v in spec.items() if k not in ("activeDeadlineSeconds",)} != \
                    {k: v for k, v in (old.get("spec") or {}).items() if k not in ("activeDeadlineSeconds",)} and \
                    spec.get("nodeName") == (old.get("spec") or {}).get("nodeName"):
                causes.append(("spec", "Forbidden: pod updates may not change fields other than "
                               "`spec.containers[*].image`, `spec.activeDeadlineSeconds` or "
                               "`spec.tolerations` (only additions to existing tolerations)"))
        if res.kind == "DaemonSet":
            spec = obj.get("spec") or {}
            selector = (spec.get("selector") or {}).get("matchLabels") or {}
            labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if not selector:
                causes.append(("spec.selector", "Required value"))
            elif any(labels.get(k) != v for k, v in selector.items()):
                causes.append(("spec.template.metadata.labels", f"Invalid value: {labels}: `selector` does not "
                               "match template `labels`"))
            if not (((spec.get("template") or {}).get("spec") or {}).get("containers")):
                causes.append(("spec.template.spec.containers", "Required value"))
            if old is not None and (old.get("spec") or {}).get("selector") != spec.get("selector"):
                causes.append(("spec.selector", f"Invalid value: {spec.get('selector')}: field is immutable"))
        if causes:
            raise invalid(res, name, causes)

    @staticmethod
    def _defaults(res: Resource, obj: dict[str, Any]) -> None:
        """The few defaults the API server adds that gpuready reads back."""
        if res.kind == "Pod":
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("schedulerName", "default-scheduler")
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif res.kind == "DaemonSet":
            spec = obj.setdefault("spec", {})
            spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
            spec.setdefault("revisionHistoryLimit", 10)
            obj["status"] = {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                             "numberReady": 0}
        elif res.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def put_internal(store: Store, res: Resource, obj: dict[str, Any], manager: str) -> dict[str, Any]:
    """A write by an emulated control-plane component (scheduler binding, kubelet), no admission."""
    meta = obj["metadata"]
    key = Store._key(res, meta.get("namespace"), meta["name"])
    current = store.objects[key]
    ownership = store._owners_after(current, obj, manager, key)
    return store._commit(res, key, current, copy.deepcopy(obj), ownership, False)
