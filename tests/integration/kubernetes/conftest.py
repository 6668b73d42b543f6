"""A real Kubernetes API emulator on loopback for each test, and a raw HTTP client for it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from gpuready.lab.kube_emulator import Emulator

TOKEN = "emulator-test-token-5f1c"


class Http:
    """Plain HTTP to the emulator, so a test sees exactly what a real API server would send."""

    def __init__(self, url: str, token: str, ca: str | None = None) -> None:
        self.url = url
        self.session = requests.Session()
        # Per request: a session's verify loses to $REQUESTS_CA_BUNDLE, which some machines set.
        self.verify: str | bool = ca or True
        self.session.headers["Authorization"] = f"Bearer {token}"

    def __call__(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                 **params: str) -> requests.Response:
        data = None
        if body is not None:
            import json

            import yaml

            data = yaml.safe_dump(body) if content_type.endswith("yaml") else json.dumps(body)
        return self.session.request(method, self.url + path, data=data, params=params,
                                    headers={"Content-Type": content_type}, timeout=10, verify=self.verify)

    def apply(self, path: str, body: Any, manager: str = "gpuready", **params: str) -> requests.Response:
        return self("PATCH", path, body, "application/apply-patch+yaml", fieldManager=manager, **params)

    def faults(self, *items: str, clear: bool = True) -> None:
        self("POST", "/_emulator/faults", {"set": list(items), "clear": clear}).raise_for_status()


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator(token=TOKEN, tick=0.05)
    emu.start_in_thread()
    yield emu
    emu.stop()


@pytest.fixture
def openshift_emulator() -> Iterator[Emulator]:
    emu = Emulator(token=TOKEN, tick=0.05, openshift=True)
    emu.start_in_thread()
    yield emu
    emu.stop()


@pytest.fixture
def http(emulator: Emulator) -> Http:
    return Http(emulator.url, TOKEN)


def eventually(probe: Callable[[], Any], timeout: float = 10, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
