"""The shared lab's state check (conftest.py): what a module leaves behind in the lab is seen, so it fails that
module instead of making the next one pass or fail."""

from __future__ import annotations

import pytest

from tests.integration.kubernetes.conftest import LabCluster, SharedLab

pytestmark = pytest.mark.slow


def test_a_label_and_a_namespace_left_behind_are_changes_and_once_undone_are_not(
    lab: LabCluster, shared_labs: SharedLab
) -> None:
    assert shared_labs.changes(settle=0) == []
    lab.kubectl.run("label", "node", "infra1.lab.local", "left=behind")
    lab.kubectl.run("create", "namespace", "left-behind")
    try:
        changes = shared_labs.changes(settle=0)
    finally:
        lab.kubectl.run("label", "node", "infra1.lab.local", "left-")
        lab.kubectl.run("delete", "namespace", "left-behind")
    assert "+ Namespace left-behind" in changes, changes
    [node] = [c for c in changes if c.startswith("~ Node infra1.lab.local:")]
    assert "'left': 'behind'" in node
    assert shared_labs.changes() == []  # the namespace's deletion finishes within the settle time
