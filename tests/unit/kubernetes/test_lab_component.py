"""`gpuready lab up --components kubernetes` refuses bad switches with one line, exit 2, before building or
starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import gpuready


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("kubernetes.fail=gpu-on-fire", "unknown fail=gpu-on-fire"),
        ("kubernetes.flavour=nomad", "flavour must be kubernetes or openshift"),
        ("kubernetes.colour=blue", "unknown option(s) colour"),
        ("kubernetes.nodes=0", "nodes must be a number from 1 to 1000"),
        ("kubernetes.nodes=1001", "nodes must be a number from 1 to 1000"),
        ("kubernetes.fail=vector-add-fails,vector-add-fails,vector-add-fails", "3 faults for 2 GPU node(s)"),
    ],
)
def test_bad_lab_switch_is_exit_2_one_line(tmp_path: Path, setting: str, words: str) -> None:
    r = gpuready("lab", "up", "--components", "kubernetes", "--set", setting, "--lab-dir", str(tmp_path))
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if line.startswith("gpuready: error:")]
    assert len(errors) == 1 and words in errors[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "kubernetes" / "logs").exists()  # nothing was started
