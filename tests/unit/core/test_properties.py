"""Properties that must hold for any input, checked with hypothesis."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gpuready.core import redact
from gpuready.core.results import CHECK_STATUSES, Check, RunResult

keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(keys, values, max_size=5), st.text(alphabet="XYZW", min_size=6, max_size=16))
def test_a_registered_secret_never_survives_redaction(data: dict, secret: str) -> None:
    # Upper-case letters only: numbers in the data may contain digit strings, and are not secrets.
    redact.register(secret)
    data = {**data, "note": f"before {secret} after", "nested": [{"k": secret}]}
    assert secret not in json.dumps(redact.structure(data))


@given(
    st.sampled_from(["password", "vcenter_password", "api_key", "bearer-token", "ansible_ssh_pass"]),
    st.text(min_size=1, max_size=20),
)
def test_secret_named_keys_are_masked(key: str, value: str) -> None:
    assert redact.structure({key: value}) == {key: redact.MASK}


@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=10),
            st.text(min_size=1, max_size=10),
            st.sampled_from(CHECK_STATUSES),
            st.text(max_size=30),
        ),
        max_size=8,
    )
)
def test_results_round_trip_through_json(rows: list[tuple[str, str, str, str]]) -> None:
    run = RunResult(command="validate gpu-node")
    run.add(*(Check(id=i, host=h, status=s, message=m) for i, h, s, m in rows))
    again = RunResult.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again.to_dict() == run.to_dict()
    assert again.exit_code() == run.exit_code()
