"""The connection helper always hands pyvmomi an SSL context, verifying unless told otherwise."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from gpuready.core import redact
from gpuready.core.errors import BadInput
from gpuready.core.platforms.vsphere import password_from_env, ssl_context


def test_context_verifies_by_default() -> None:
    context = ssl_context(verify=True)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_insecure_context_checks_nothing() -> None:
    context = ssl_context(verify=False)
    assert context.verify_mode == ssl.CERT_NONE
    assert not context.check_hostname


def test_unreadable_ca_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="ca_file"):
        ssl_context(verify=True, ca_file=str(tmp_path / "missing.pem"))


def test_password_comes_from_the_environment_and_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUREADY_TEST_VC_PW", "hunter2-vc-secret")
    assert password_from_env("GPUREADY_TEST_VC_PW") == "hunter2-vc-secret"
    assert "hunter2-vc-secret" not in redact.text("login with hunter2-vc-secret")


def test_missing_password_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUREADY_TEST_VC_PW", raising=False)
    with pytest.raises(BadInput, match="export GPUREADY_TEST_VC_PW"):
        password_from_env("GPUREADY_TEST_VC_PW")
