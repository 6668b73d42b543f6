"""The runner knows a task that hit its ``timeout:`` keyword in both ways ansible-core reports one: the ``timedout``
result key of ansible-core >= 2.18 (what the installed one gives: tests/integration/core/test_stopped_mid_loop.py),
and the message alone of ansible-core 2.17 (ansible 10, still allowed by pyproject), quoted from ansible's own
test/integration/targets/adhoc/runme.sh (ansible/ansible, GPL-3.0)."""

from __future__ import annotations

from gpuready.core.runner import TimedOut, _timed_out

CORE_2_17 = "The command action failed to execute in the expected time frame (5) and was terminated"


def _event(kind: str, res: dict[str, object]) -> dict[str, object]:
    return {"event": kind, "event_data": {"host": "vc", "task": "ESXi | Set ATS", "res": res}}


def test_the_timedout_key_of_ansible_core_2_18_and_later() -> None:
    event = _event(
        "runner_item_on_failed", {"msg": "Task failed: Timed out after 3 second(s).", "timedout": {"period": 3}}
    )
    assert _timed_out(event) == TimedOut("vc", "ESXi | Set ATS", 3)


def test_the_message_of_ansible_core_2_17() -> None:
    assert _timed_out(_event("runner_on_failed", {"failed": True, "msg": CORE_2_17})) == TimedOut(
        "vc", "ESXi | Set ATS", 5
    )


def test_other_failures_are_not_timeouts() -> None:
    assert _timed_out(_event("runner_on_failed", {"failed": True, "msg": "Unable to connect to vCenter"})) is None
    assert _timed_out(_event("runner_on_ok", {"timedout": {"period": 3}})) is None
