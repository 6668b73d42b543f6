"""gpuready runs on Python 3.10-3.13, except the TensorFlow/Horovod extra, which stays on 3.11."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.conftest import ROOT
from tests.pythons import find_python

SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
PACKAGES = ("core", "provision", "validate", "workloads")
#: what Python 3.11 added to the standard library (What's New in Python 3.11)
NEWER_STDLIB = {"tomllib", "wsgiref.types"}
NEWER_NAMES = {
    "ExceptionGroup",
    "BaseExceptionGroup",
    "TaskGroup",
    "StrEnum",
    "Self",
    "LiteralString",
    "Never",
    "assert_never",
    "reveal_type",
    "NotRequired",
    "Required",
    "TypeVarTuple",
    "Unpack",
    "dataclass_transform",
    "UTC",
    "file_digest",
    "add_note",
}

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _env(version: str) -> dict[str, str]:
    return {**default_environment(), "python_version": version, "python_full_version": f"{version}.0"}


def test_requires_python_admits_3_10_to_3_13_and_classifiers_say_so() -> None:
    spec = SpecifierSet(PROJECT["project"]["requires-python"])
    assert all(spec.contains(f"{v}.0") for v in SUPPORTED)
    assert not spec.contains("3.9.18")
    classifiers = PROJECT["project"]["classifiers"]
    assert [c.rsplit(" ", 1)[-1] for c in classifiers if c.startswith("Programming Language :: Python :: 3.")] == list(
        SUPPORTED
    )


@pytest.mark.parametrize("version", SUPPORTED)
def test_base_and_extras_but_train_install_on_every_supported_python(version: str) -> None:
    env = _env(version)
    deps = list(PROJECT["project"]["dependencies"])
    for extra, requirements in PROJECT["project"]["optional-dependencies"].items():
        if extra != "train":
            deps += requirements
    for dep in map(Requirement, deps):
        assert dep.marker is None or dep.marker.evaluate(env), f"{dep} is not installed on Python {version}"
        assert not dep.specifier or "python" not in str(dep).lower(), dep


@pytest.mark.parametrize("version", SUPPORTED)
def test_train_extra_brings_tensorflow_and_horovod_on_3_11_only(version: str) -> None:
    train = {r.name: r for r in map(Requirement, PROJECT["project"]["optional-dependencies"]["train"])}
    for name in ("tensorflow", "horovod"):
        assert train[name].marker is not None and train[name].marker.evaluate(_env(version)) == (version == "3.11")


def test_ruff_targets_the_oldest_supported_python() -> None:
    assert PROJECT["tool"]["ruff"]["target-version"] == "py310"


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def test_package_code_uses_no_standard_library_newer_than_3_10() -> None:
    found = []
    watched = ("typing", "datetime", "asyncio", "enum", "hashlib")
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        aliases = {
            a.asname or a.name: a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import)
            for a in n.names
            if a.name in watched
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [f"{path}: import {a.name}" for a in node.names if a.name in NEWER_STDLIB]
            elif isinstance(node, ast.ImportFrom):
                if node.module in NEWER_STDLIB:
                    found.append(f"{path}: from {node.module}")
                elif node.module in watched:
                    found += [
                        f"{path}: from {node.module} import {a.name}" for a in node.names if a.name in NEWER_NAMES
                    ]
            elif type(node).__name__ == "TryStar":
                found.append(f"{path}:{node.lineno}: except*")
            elif isinstance(node, ast.Name) and node.id in ("ExceptionGroup", "BaseExceptionGroup"):
                found.append(f"{path}:{node.lineno}: {node.id}")
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in NEWER_NAMES
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                found.append(f"{path}:{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    assert not found, "\n".join(found)


def test_package_code_compiles_with_python_3_10() -> None:
    python = find_python("3.10")
    if python is None:
        pytest.skip("no Python 3.10 here (docs/python-versions.md: optional outside the Python 3.11 quick start)")
    code = (
        "import sys, ast\nbad = []\nfor p in sys.argv[1:]:\n    try:\n        compile(open(p).read(), p, 'exec')\n"
        "    except SyntaxError as e:\n        bad.append(f'{p}:{e.lineno}: {e.msg}')\nprint('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    sources = [str(p) for p in _sources()] + [str(p) for p in (ROOT / "benchmarks" / "gpu").glob("*.py")]
    done = subprocess.run([python, "-c", code, *sources], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
