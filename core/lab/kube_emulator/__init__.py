"""A small Kubernetes API emulator (simulated; no containers run) for the lab and the tests.

It serves, over real HTTP on loopback, what gpuready and the kubernetes/openshift clients
call: discovery, CRUD with server-side apply, strategic-merge and JSON-merge patches,
label/field selectors, the status and log subresources, Status errors; behind it a
simulated DaemonSet controller, scheduler and kubelet (see :mod:`.cluster`).

kmock (evaluated first) stores objects as plain dicts merged key by key and has no
server-side apply, selectors or log subresource, so this is written on aiohttp instead.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from gpuready.lab.kube_emulator.cluster import DEFAULT_NODES, Cluster, NodeSeed, seed
from gpuready.lab.kube_emulator.server import Api, Faults
from gpuready.lab.kube_emulator.store import Store

__all__ = ["DEFAULT_NODES", "Emulator", "NodeSeed"]


@dataclass
class Emulator:
    nodes: list[NodeSeed] = field(default_factory=lambda: list(DEFAULT_NODES))
    openshift: bool = False
    token: str = ""
    faults: list[str] = field(default_factory=list)
    tick: float = 0.2
    url: str = ""
    _loop: Any = None
    _runner: Any = None
    _thread: Any = None

    def __post_init__(self) -> None:
        self.store = Store(openshift=self.openshift)
        seed(self.store, self.nodes, self.openshift)
        fault_switches = Faults()
        fault_switches.set(self.faults)
        self.api = Api(self.store, self.token, fault_switches)
        self.cluster = Cluster(self.store, fault_switches, self.openshift, self.tick)

    async def start(self, host: str = "127.0.0.1", port: int = 0, ssl_context: Any = None) -> str:
        from aiohttp import web

        self._runner = web.AppRunner(self.api.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context)
        await site.start()
        bound = self._runner.addresses[0][1]
        self.url = f"{'https' if ssl_context else 'http'}://{host}:{bound}"
        self._controllers = asyncio.get_running_loop().create_task(self.cluster.run())
        return self.url

    def start_in_thread(self, port: int = 0) -> str:
        """Serve from a background thread (tests): still a real HTTP server on loopback."""
        started = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self.start(port=port))
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True, name="kube-emulator")
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the Kubernetes emulator did not start")
        return self.url

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            self._controllers.cancel()
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
