"""What `validate training` says when TensorFlow or Horovod is missing: commands that install them into this
Python as the Makefile does, and no suggestion of what was already asked for."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
import tomllib

import pytest

from gpuready.core.errors import Unreachable
from gpuready.workloads import launchers
from tests.conftest import ROOT


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    real = importlib.util.find_spec

    def hide(*names: str) -> None:
        monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m in names else real(m, *a))

    return hide


def refusal(distribution: str) -> str:
    with pytest.raises(Unreachable) as raised:
        launchers.require_local_training(distribution)
    return str(raised.value)


def test_with_mwms_asked_the_message_installs_tensorflow_and_does_not_suggest_mwms(without) -> None:  # type: ignore[no-untyped-def]
    without("tensorflow", "horovod")
    said = refusal("mwms")
    assert said.startswith(f"tensorflow not installed in {sys.prefix}: {sys.executable} -m pip install ")
    assert "--distribution mwms" not in said and "horovod==" not in said


def test_with_horovod_the_message_builds_it_after_tensorflow_and_offers_mwms(without) -> None:  # type: ignore[no-untyped-def]
    without("tensorflow", "horovod")
    said = refusal("horovod")
    assert "README" not in said and "gpuready[train]" not in said  # gpuready is on no index
    tensorflow, horovod = said.split(": ", 1)[1].split(" && ")
    assert tensorflow == f"{sys.executable} -m pip install 'tensorflow==2.15.1'"
    assert horovod.startswith(launchers.HOROVOD_BUILD_ENV + f" {sys.executable} -m pip install --no-build-isolation")
    assert "(needs cmake and g++)" in horovod
    # The page as the checkout has it (a wheel has it under gpuready/docs: test_installed_wheel.py).
    assert f'(see {ROOT / "docs" / "training.md"}, "Installing TensorFlow and Horovod")' in said
    assert said.endswith(", or use --distribution mwms (TensorFlow alone)")


def test_only_what_is_missing_is_installed(without) -> None:  # type: ignore[no-untyped-def]
    without("horovod")
    said = refusal("horovod")
    assert said.startswith("horovod not installed") and "tensorflow==" not in said


def test_the_advice_is_what_the_makefile_runs_and_the_extra_pins() -> None:
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    built = re.search(r"^HOROVOD_BUILD := (.*)$", makefile, re.MULTILINE)
    assert built and built.group(1).split() == launchers.HOROVOD_BUILD_ENV.split()
    assert f"--no-build-isolation '{launchers.HOROVOD_REQUIREMENT}'" in makefile
    assert f"'{launchers.TENSORFLOW_REQUIREMENT}'" in makefile
    train = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["train"]
    pins = {shlex.split(r.split(";")[0])[0] for r in train}
    assert {launchers.TENSORFLOW_REQUIREMENT, launchers.HOROVOD_REQUIREMENT} <= pins
    doc = (ROOT / "docs" / "training.md").read_text()
    assert "## Installing TensorFlow and Horovod" in doc and launchers.HOROVOD_BUILD_ENV.split()[0] in doc
