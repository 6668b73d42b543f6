"""The HTTP face of the emulator: discovery, the REST verbs, subresources and Status errors.

Paths, verbs, content types and error bodies follow the real API server for the calls
gpuready and the kubernetes/openshift clients make. ``/_emulator/*`` is the emulator's own
admin endpoint (faults, request counts); a real server has no such thing.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

import yaml
from aiohttp import web

from gpuready.lab.kube_emulator import selectors
from gpuready.lab.kube_emulator.store import ApiError, Resource, Store

log = logging.getLogger(__name__)

GIT_VERSION = "v1.30.4"
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/json-patch+json": "json",
}


class Faults:
    """Switches for the failures a lab or test injects; changeable while the emulator runs."""

    KINDS = ("plugin-not-ready", "allocatable-zero", "vector-add-fails", "vector-add-hangs", "permission-denied",
             "forbidden")

    def __init__(self) -> None:
        self.active: set[str] = set()
        #: The next N resource requests are answered 503, as an overloaded API server does.
        self.unavailable = 0

    def set(self, items: list[str]) -> None:
        for item in items:
            if item.startswith("unavailable="):
                self.unavailable = int(item.partition("=")[2])
            elif item in self.KINDS:
                self.active.add(item)
            elif item:
                raise ValueError(f"unknown fault {item!r} (known: {', '.join(self.KINDS)}, unavailable=N)")


def status_response(error: ApiError) -> web.Response:
    return web.json_response(error.status(), status=error.code)


class Api:
    def __init__(self, store: Store, token: str = "", faults: Faults | None = None) -> None:
        self.store = store
        self.token = token
        self.faults = faults or Faults()
        self.requests: Counter[str] = Counter()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors], client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/_emulator/{what}", self._admin)
        app.router.add_get("/version", self._version)
        app.router.add_get("/healthz", self._ok)
        app.router.add_get("/readyz", self._ok)
        app.router.add_get("/api", self._api_versions)
        app.router.add_get("/apis", self._api_groups)
        app.router.add_route("*", "/{tail:.*}", self._resource)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            self._authenticate(request)
            return await handler(request)
        except ApiError as e:
            return status_response(e)
        except web.HTTPException:
            raise
        except Exception as e:  # a bug in the emulator: answer as an API server would, and log it
            log.exception("emulator error on %s %s", request.method, request.path)
            return status_response(ApiError(500, "InternalError", f"Internal error occurred: {e}"))

    def _authenticate(self, request: web.Request) -> None:
        if not self.token:
            return
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    @staticmethod
    async def _ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # -- discovery
    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": GIT_VERSION.split(".")[1], "gitVersion": GIT_VERSION,
                                  "gitCommit": "gpuready-emulator", "gitTreeState": "clean",
                                  "buildDate": "2024-08-14T00:00:00Z", "goVersion": "go1.22.5", "compiler": "gc",
                                  "platform": "linux/amd64"})

    async def _api_versions(self, request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]})

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for r in self.store.resources:
            if r.group and r.version not in groups.setdefault(r.group, []):
                groups[r.group].append(r.version)
        return groups

    @staticmethod
    def _group(name: str, versions: list[str]) -> dict[str, Any]:
        listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": listed, "preferredVersion": listed[0]}

    async def _api_groups(self, request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1",
                                  "groups": [self._group(g, v) for g, v in self._groups().items()]})

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        items = []
        for r in self.store.resources:
            if (r.group, r.version) != (group, version):
                continue
            items.append({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                          "kind": r.kind, "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                                                    "update", "watch"], "shortNames": list(r.short_names)})
            for sub in r.subresources:
                items.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                              "kind": r.kind if sub == "status" else "Pod",
                              "verbs": ["get", "patch", "update"] if sub == "status" else ["get"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": items}

    # -- resources
    async def _resource(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if parts[1] not in self._groups():
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(parts) == 2:
                return web.json_response({"kind": "APIGroup", "apiVersion": "v1",
                                          **self._group(parts[1], self._groups()[parts[1]])})
            group, version, rest = parts[1], parts[2], parts[3:]
            if version not in self._groups()[group]:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return web.json_response(self._resource_list(group, version))
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        res = self.store.resource(group, version, rest[0])
        if res is None or (namespace is not None and not res.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if (sub and sub not in res.subresources) or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self.requests[f"{request.method} {res.plural}{'/' + sub if sub else ''}"] += 1
        self._inject(request, res, namespace, name)
        return await self._dispatch(request, res, namespace, name, sub)

    def _inject(self, request: web.Request, res: Resource, namespace: str | None, name: str | None) -> None:
        if self.faults.unavailable > 0:
            self.faults.unavailable -= 1
            self.requests["503"] += 1
            raise ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request",
                           {"retryAfterSeconds": 1})
        if "forbidden" in self.faults.active:
            verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
                request.method, request.method.lower())
            if verb == "get" and name is None:
                verb = "list"
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            raise ApiError(403, "Forbidden", f'{res.plural}{"." + res.group if res.group else ""} is forbidden: '
                           f'User "system:serviceaccount:gpuready:validator" cannot {verb} resource '
                           f'"{res.plural}" in API group "{res.group}"{where}',
                           {"group": res.group, "kind": res.plural})

    async def _dispatch(self, request: web.Request, res: Resource, namespace: str | None, name: str | None,
                        sub: str) -> web.StreamResponse:
        q = request.query
        dry_run = q.get("dryRun") == "All"
        manager = q.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/")[0]
        method = request.method
        if res.namespaced and namespace is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and name is None:
            if q.get("watch") in ("true", "1"):
                raise ApiError(405, "MethodNotAllowed", "watch is not supported by the gpuready emulator")
            return web.json_response(self._list(res, namespace, q))
        if method == "GET" and sub == "log":
            return web.Response(text=self._log(res, namespace or "", name or "", q), content_type="text/plain")
        if method == "GET":
            return web.json_response(self.store.get(res, namespace, name or ""))
        if method == "POST" and name is None:
            body = await self._body(request)
            return web.json_response(self.store.create(res, namespace, body, manager, dry_run), status=201)
        if method == "PUT" and name:
            body = await self._body(request)
            return web.json_response(self.store.update(res, namespace, name, body, manager, sub, dry_run))
        if method == "PATCH" and name:
            created = self.store.find(res, namespace, name) is None
            obj = await self._patch(request, res, namespace, name, sub, dry_run)
            return web.json_response(obj, status=201 if created else 200)
        if method == "DELETE" and name and not sub:
            obj = self.store.delete(res, namespace, name, dry_run)
            if res.kind == "Pod":
                return web.json_response(obj)
            return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "details": {"name": name, "group": res.group, "kind": res.plural,
                                                  "uid": obj["metadata"].get("uid")}})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    async def _patch(self, request: web.Request, res: Resource, namespace: str | None, name: str, sub: str,
                     dry_run: bool) -> dict[str, Any]:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        kind = PATCH_TYPES.get(content_type)
        text = await request.text()
        if kind is None or kind == "json":
            accepted = ", ".join(t for t, k in PATCH_TYPES.items() if k != "json")
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                           f"accepted media types include: {accepted}")
        try:
            body = yaml.safe_load(text) if kind == "apply" else json.loads(text)
        except (ValueError, yaml.YAMLError) as e:
            raise ApiError(400, "BadRequest", f"error decoding patch: {e}") from e
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        manager = request.query.get("fieldManager", "")
        if kind == "apply":
            return self.store.apply(res, namespace, name, body, manager, request.query.get("force") == "true", sub,
                                    dry_run)
        manager = manager or request.headers.get("User-Agent", "unknown").split("/")[0]
        return self.store.patch(res, namespace, name, body, kind, manager, sub, dry_run)

    @staticmethod
    async def _body(request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json(loads=json.loads)
        except ValueError:
            try:
                body = yaml.safe_load(await request.text())
            except yaml.YAMLError as e:
                raise ApiError(400, "BadRequest", f"error decoding body: {e}") from e
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        return body

    def _list(self, res: Resource, namespace: str | None, q: Any) -> dict[str, Any]:
        try:
            tests = []
            if q.get("labelSelector"):
                tests.append(selectors.label_selector(q["labelSelector"]))
            if q.get("fieldSelector"):
                tests.append(selectors.field_selector(q["fieldSelector"], res.plural))
        except selectors.SelectorError as e:
            raise ApiError(400, "BadRequest", str(e)) from e
        items = [o for o in self.store.list(res, namespace) if all(t(o) for t in tests)]
        for item in items:  # list items carry no apiVersion/kind, as from a real server
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": items}

    def _log(self, res: Resource, namespace: str, name: str, q: Any) -> str:
        pod = self.store.get(res, namespace, name)
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = q.get("container") or ""
        if not container:
            if len(containers) > 1:
                raise ApiError(400, "BadRequest", f"a container name must be specified for pod {name}, choose one "
                               f"of: [{' '.join(containers)}]")
            container = containers[0]
        if container not in containers:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        key = (namespace, name, container)
        if key not in self.store.logs:
            statuses = {s["name"]: s for s in (pod.get("status") or {}).get("containerStatuses", [])}
            waiting = (statuses.get(container, {}).get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason", "ContainerCreating")
            raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        text = self.store.logs[key]
        if q.get("tailLines"):
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(q["tailLines"]):]) if int(q["tailLines"]) else ""
        return text

    # -- the emulator's own admin endpoint
    async def _admin(self, request: web.Request) -> web.Response:
        what = request.match_info["what"]
        if what == "faults" and request.method == "POST":
            body = await request.json()
            try:
                if body.get("clear"):
                    self.faults.active.clear()
                    self.faults.unavailable = 0
                self.faults.set(list(body.get("set", [])))
            except ValueError as e:
                raise ApiError(400, "BadRequest", str(e)) from e
        if what in ("faults", "stats"):
            return web.json_response({"faults": sorted(self.faults.active), "unavailable": self.faults.unavailable,
                                      "requests": dict(self.requests), "simulated": True})
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
