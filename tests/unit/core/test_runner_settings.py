"""$GPUREADY_PEXPECT_TIMEOUT_S: ansible-runner's look at a silent playbook, written where ansible-runner reads its
settings (``env/settings`` of its private folder); a value that is not a number is bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuready.core.errors import BadInput
from gpuready.core.runner import PEXPECT_TIMEOUT_VAR, _runner_settings


def test_the_look_is_written_as_ansible_runner_s_pexpect_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PEXPECT_TIMEOUT_VAR, "600")
    _runner_settings(tmp_path)
    assert yaml.safe_load((tmp_path / "env" / "settings").read_text()) == {"pexpect_timeout": 600.0}


def test_unset_leaves_ansible_runner_s_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PEXPECT_TIMEOUT_VAR, raising=False)
    _runner_settings(tmp_path)
    assert not (tmp_path / "env").exists()


def test_a_look_that_is_not_a_number_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PEXPECT_TIMEOUT_VAR, "ten minutes")
    with pytest.raises(BadInput, match="GPUREADY_PEXPECT_TIMEOUT_S='ten minutes': not a number of seconds"):
        _runner_settings(tmp_path)
