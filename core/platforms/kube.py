"""The one place gpuready talks to a Kubernetes/OpenShift API from Python.

Client configuration as kubectl users expect (a kubeconfig and context, $KUBECONFIG,
~/.kube/config, then in-cluster), TLS verified unless the inventory says otherwise, and
errors translated once: refused credentials, 403 and an unreachable API are one
:class:`Unreachable` line (exit 3); 429 and 5xx are retried with exponential backoff.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpuready.core import redact
from gpuready.core.errors import BadInput, Unreachable, shorten

if TYPE_CHECKING:
    from gpuready.core.settings import Kubernetes

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Answers worth asking again: rate limited, or the API server (or what is in front of it) is struggling.
RETRIABLE = {429, 500, 502, 503, 504}
BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0
#: (connect, read) seconds for one request.
REQUEST_TIMEOUT = (5, 30)
#: Requests in flight at once where there is one per node (logs, test pods): enough to overlap the round
#: trips at 1000 nodes, far below the API server's default limit (--max-requests-inflight 400).
PARALLEL_REQUESTS = 16


class NotFound(Exception):
    """A 404 for one object; callers decide whether that is a finding."""


class Conflict(Exception):
    """A 409: AlreadyExists or Conflict; callers resolve it."""


class BadRequest(Exception):
    """A 400, e.g. the log of a container that never started."""


@dataclass
class Kube:
    """Typed API clients sharing one configuration, plus the retrying, translating :meth:`call`."""

    api_client: Any
    server: str
    retries: int = 5

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @property
    def apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    def dynamic(self) -> Any:
        """OpenShift's dynamic client, for kinds Kubernetes has no typed API for (SCCs)."""
        from openshift.dynamic import DynamicClient

        return self.call(lambda: DynamicClient(self.api_client), "discover the API")

    def call(self, fn: Callable[[], T], what: str) -> T:
        """Run one API call: retry what is temporary, translate what is not."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        delay = BACKOFF_FIRST_S
        for attempt in range(1, self.retries + 1):
            try:
                return fn()
            except ApiException as e:
                status = int(e.status or 0)
                if status in RETRIABLE and attempt < self.retries:
                    log.warning(
                        "%s: API answered %s, retrying in %.1fs (%d/%d)", what, status, delay, attempt, self.retries
                    )
                    time.sleep(delay)
                    delay = min(delay * 2, BACKOFF_MAX_S)
                    continue
                raise translate(e, what, self.server) from e
            except HTTPError as e:
                raise Unreachable(
                    f"cannot reach the Kubernetes API at {self.server} to {what}: {shorten(_reason(e), 160)}"
                ) from e
            except NotTheApi as e:
                raise Unreachable(f"the server at {self.server} is not the Kubernetes API: to {what}, {e}") from e
            except ValueError as e:  # the client could not read the answer (pydantic's errors are ValueErrors)
                raise Unreachable(
                    f"unexpected answer from the Kubernetes API at {self.server} to {what}: "
                    f"{shorten(str(e).splitlines()[0], 160)}"
                ) from e
        raise AssertionError("unreachable")  # the loop returns or raises

    def read(self, fn: Callable[..., Any], what: str) -> Obj:
        """One call of a generated client method, its JSON answer read as plain data (an :class:`Obj`).

        The client's own models validate and copy every field of every object (about 10 ms a pod, most
        of gpuready's CPU at 1000 nodes); the checks read a handful of fields, so they read the JSON."""
        return Obj(self.call(lambda: api_object(_body(fn(_preload_content=False))), what))

    def items(self, fn: Callable[..., Any], what: str) -> list[Obj]:
        """The objects of one LIST call, read as :meth:`read` does. A LIST the server does not know (404) is a
        server that is not the Kubernetes API: a real one answers an empty list, even in a missing namespace."""
        try:
            found = self.call(lambda: api_object(_body(fn(_preload_content=False)), listing=True), what)
        except NotFound as e:
            why = f"it answered 404 to {what} ({shorten(str(e), 80)})"
            raise Unreachable(f"the server at {self.server} is not the Kubernetes API: {why}") from e
        return [Obj(item) for item in found["items"] or []]

    def text(self, fn: Callable[..., Any], what: str) -> str:
        """One call whose answer is text (a pod's log), undecoded by the client's models."""
        return self.call(lambda: _body(fn(_preload_content=False)).decode("utf-8", "replace"), what)

    def each(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
        """``fn(item)`` for every item, :data:`PARALLEL_REQUESTS` at a time; results in the items' order, the
        first error raised. Ctrl-C or an error cancels what has not started and waits for what has (each
        request ends within REQUEST_TIMEOUT), so nothing keeps running behind the caller's back."""
        todo = list(items)
        if len(todo) <= 1:
            return [fn(item) for item in todo]
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=min(PARALLEL_REQUESTS, len(todo)), thread_name_prefix="kube")
        try:
            return list(pool.map(fn, todo))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


class NotTheApi(ValueError):
    """JSON that is not a Kubernetes API object (a ValueError: :meth:`Kube.call` says so in one line, exit 3)."""


def api_object(body: bytes, listing: bool = False) -> dict[str, Any]:
    """An API answer as plain data, refused when it is not a Kubernetes object: "All of the JSON accepted and
    returned by the server has a schema, identified by the 'kind' and 'apiVersion' fields", and "All lists use
    the 'items' field to contain the array of objects they return" (the Kubernetes API conventions,
    https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md).
    A kubeconfig that points at another JSON service then fails as one line instead of deep in a check."""
    import json

    data = json.loads(body)  # not JSON at all: a ValueError too
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("kind", "apiVersion")):
        raise NotTheApi(
            f"it answered JSON without a kind and an apiVersion: {shorten(body.decode(errors='replace'), 80)}"
        )
    if listing:
        items = data.get("items")
        if not (items is None or isinstance(items, list)) or not all(isinstance(i, dict) for i in items or []):
            raise NotTheApi(f"it answered a {data['kind']} whose items are not a list of objects")
    return data


def _body(response: Any) -> bytes:
    """All of a raw urllib3 response, its connection back in the pool."""
    try:
        return bytes(response.data)
    finally:
        response.release_conn()


def _snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class Obj(dict):  # type: ignore[type-arg]
    """A Kubernetes object as the API sent it (a dict), also read with the attribute names of the client's
    models: ``pod.status.container_statuses`` is ``pod["status"]["containerStatuses"]``, None when absent.
    Maps whose keys are data, not field names (``capacity``, ``labels``), stay dicts to ``.get`` from."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _wrap(self.get(_snake_to_camel(name), self.get(name)))


def _wrap(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, Obj):
        return Obj(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _reason(e: Exception) -> str:
    reason = getattr(e, "reason", None)
    return str(reason or e)


def _status_message(e: Any) -> str:
    import json

    try:
        return str(json.loads(e.body).get("message") or e.reason)
    except (TypeError, ValueError, AttributeError):
        return str(e.reason or e.status)


def translate(e: Any, what: str, server: str) -> Exception:
    status = int(e.status or 0)
    message = redact.text(_status_message(e))
    if status == 404:
        return NotFound(message)
    if status == 409:
        return Conflict(message)
    if status == 400:
        return BadRequest(message)
    if status == 401:
        return Unreachable(
            f"the Kubernetes API at {server} refused the credentials (401) to {what}; "
            "check the kubeconfig's user and token"
        )
    if status == 403:
        return Unreachable(f"not allowed to {what} (403 Forbidden): {shorten(message, 200)}")
    if status in RETRIABLE:
        return Unreachable(f"the Kubernetes API at {server} kept answering {status} to {what}: {shorten(message, 160)}")
    return Unreachable(f"the Kubernetes API refused to {what} ({status}): {shorten(message, 200)}")


def kubeconfig_path(settings: Kubernetes) -> Path | None:
    """The kubeconfig kubectl would use: the inventory's, else $KUBECONFIG (first entry), else ~/.kube/config."""
    if settings.kubeconfig:
        return Path(settings.kubeconfig).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    for entry in env.split(os.pathsep):
        if entry:
            return Path(entry).expanduser()
    default = Path("~/.kube/config").expanduser()
    return default if default.exists() else None


def _timed_api_client(base: type) -> type:
    """An ApiClient whose every request has REQUEST_TIMEOUT unless the caller set one.

    The generated clients pass ``_request_timeout=None`` by default, which urllib3 reads as "wait
    forever": an API server that stops answering would hang gpuready instead of being exit 3.
    """

    class TimedApiClient(base):  # type: ignore[misc]
        def call_api(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("_request_timeout") is None:
                kwargs["_request_timeout"] = REQUEST_TIMEOUT
            return super().call_api(*args, **kwargs)

    return TimedApiClient


def _check_client_certificate(configuration: Any, path: Path | None) -> None:
    """A client certificate or key that TLS cannot load is the kubeconfig's fault, said before any request:
    loaded only once the TCP connection is up, it would read as "cannot reach the Kubernetes API" (exit 3)."""
    import ssl

    if not configuration.cert_file:
        return
    try:
        # An empty passphrase: an encrypted key fails here instead of OpenSSL asking for one on the terminal.
        ssl.create_default_context().load_cert_chain(configuration.cert_file, configuration.key_file, password=b"")
    except (ssl.SSLError, OSError) as e:
        raise BadInput(
            f"kubeconfig {path}: the user's client certificate or key cannot be loaded ({shorten(str(e), 120)}); "
            "check client-certificate(-data) and client-key(-data)"
        ) from None


def _bound_refresh(configuration: Any, path: Path | None) -> None:
    """The client runs the exec credential plugin again before a request once its token is within 5 minutes of its
    expirationTimestamp (kube_config's refresh_api_key_hook), and waits for it as long as at the first load: that
    call gets the same bound, and one past it is one line, exit 3."""
    from gpuready.core import cancel

    hook = configuration.refresh_api_key_hook
    if hook is None:
        return
    what = f"the kubeconfig's credential plugin, run again to refresh its token (kubeconfig {path})"

    def refresh(c: Any) -> None:
        try:
            cancel.bounded(lambda: hook(c), cancel.credential_timeout_s(), what)
        except TimeoutError as e:
            raise Unreachable(f"{e} ($GPUREADY_CREDENTIAL_TIMEOUT_S sets the bound)") from None
        for secret in (c.api_key or {}).values():  # the new token is as secret as the first
            redact.register(str(secret).removeprefix("Bearer ").strip())

    configuration.refresh_api_key_hook = refresh


def connect(settings: Kubernetes) -> Kube:
    """A configured client; a missing or broken kubeconfig is one Unreachable line (exit 3)."""
    import yaml
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    from gpuready.core import cancel

    configuration = client.Configuration()
    path = kubeconfig_path(settings)
    try:
        if path is not None:
            if not path.is_file():
                raise Unreachable(
                    f"kubeconfig {path} not found (gpuready.kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config)"
                )
            # An exec credential plugin runs while the kubeconfig loads, and the client waits for it forever.
            seconds = cancel.credential_timeout_s()
            cancel.bounded(
                lambda: config.load_kube_config(
                    config_file=str(path), context=settings.context or None, client_configuration=configuration
                ),
                seconds,
                f"the kubeconfig's credential plugin (kubeconfig {path})",
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            raise Unreachable(
                "no kubeconfig: set gpuready.kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config (or run inside a pod)"
            )
    except TimeoutError as e:
        raise Unreachable(f"{e} ($GPUREADY_CREDENTIAL_TIMEOUT_S sets the bound)") from None
    except ConfigException as e:
        raise Unreachable(f"kubeconfig {path or '(in-cluster)'}: {shorten(redact.text(str(e)), 200)}") from e
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as e:
        raise Unreachable(f"kubeconfig {path}: unreadable ({shorten(type(e).__name__ + ': ' + str(e), 160)})") from e
    _bound_refresh(configuration, path)
    _check_client_certificate(configuration, path)
    for secret in (configuration.api_key or {}).values():
        redact.register(str(secret).removeprefix("Bearer ").strip())
    if configuration.password:
        redact.register(configuration.password)
    if not settings.verify_tls:
        log.warning("TLS verification of %s is off (gpuready.kubernetes.verify_tls: false)", configuration.host)
        configuration.verify_ssl = False
    elif not configuration.verify_ssl:  # the kubeconfig's cluster says insecure-skip-tls-verify: true
        if "verify_tls" in settings.model_fields_set:
            raise BadInput(
                f"kubeconfig {path}: its cluster sets insecure-skip-tls-verify: true, and gpuready.kubernetes."
                "verify_tls is true; remove one (verification is off only when both agree)"
            )
        log.warning(
            "TLS verification of %s is off: the kubeconfig's cluster sets insecure-skip-tls-verify "
            "(gpuready.kubernetes.verify_tls: true in the inventory refuses that)",
            configuration.host,
        )
    if str(configuration.host).lower().startswith("http://") and (configuration.api_key or configuration.password):
        # kubectl sends them too; the word is what was missing: anyone on the path reads the credentials.
        log.warning("the credentials of %s go over plain http, unencrypted (use its https address)", configuration.host)
    # Temporary failures are retried by Kube.call with backoff; urllib3 need not retry on its own as well.
    configuration.retries = 0
    # One kept-alive connection per parallel request, not a new TLS handshake for each.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, PARALLEL_REQUESTS)
    api_client = _timed_api_client(client.ApiClient)(configuration)
    return Kube(api_client=api_client, server=configuration.host, retries=settings.api_retries)
