"""The order in which pytest-xdist's real LoadScopeScheduling hands our test groups to its workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests import scheduling
from tests.conftest import xdist_group

pytest_plugins = ["pytester"]

KUBE = [f"tests/integration/kubernetes/test_lab_cluster.py::test_{i}" for i in range(3)]
ROOTS = ["tests/integration/provision/test_debian_root.py::test_first"]
MANY = [f"tests/unit/core/test_many.py::test_{i}" for i in range(10)]
COLLECTION = [*MANY, *KUBE, *ROOTS]


class Worker:
    """What the scheduler uses of xdist's WorkerController: an id, and the tests it was sent."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent: list[list[str]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append([COLLECTION[i] for i in indices])

    def shutdown(self) -> None:
        self.shutting_down = True


def _first_groups(pytester: pytest.Pytester, seconds: dict[str, float]) -> list[str]:
    config = pytester.parseconfig("--tx", "2*popen", "--dist", "loadgroup")
    scheduler = scheduling.longest_first(LoadScopeScheduling, xdist_group, seconds)(config)
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    return [xdist_group(worker.sent[0][0]) for worker in workers]


def test_the_longest_recorded_groups_go_first_whatever_their_test_count(pytester: pytest.Pytester) -> None:
    seconds = {**dict.fromkeys(MANY, 0.1), **dict.fromkeys(KUBE, 100.0), ROOTS[0]: 500.0}
    assert _first_groups(pytester, seconds) == ["tests/integration/provision/test_debian_root.py", "kubernetes"]


def test_without_a_record_the_groups_with_most_tests_go_first(pytester: pytest.Pytester) -> None:
    assert _first_groups(pytester, {}) == ["tests/unit/core/test_many.py", "kubernetes"]


def test_a_run_merges_its_durations_into_the_record(tmp_path: Path) -> None:
    record = tmp_path / "seconds.json"
    scheduling.save({"a": 1.0, "b": 2.0}, record)
    scheduling.save({"b": 3.0}, record)  # a run that selected only b keeps a's
    assert scheduling.load(record) == {"a": 1.0, "b": 3.0}
    record.write_text("{not json")
    assert scheduling.load(record) == {}
