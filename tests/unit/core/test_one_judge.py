"""One way to judge a figure: one verdict helper (core/verdict.py), one reference type and one mates rule
(core/perf.py), which the node checks and the training both use; and the launchers build on no controller."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from tests.conftest import ROOT

SHIPPED = ("core", "validate", "provision", "workloads")


def _trees() -> dict[str, ast.Module]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *SHIPPED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = {}
    for name in listed.stdout.split():
        path = ROOT / name
        if name.endswith(".py") and path.exists():
            found[name] = ast.parse(path.read_text(), filename=name)
    return found


TREES = _trees()


def _defining(kind: type, name: str) -> list[str]:
    places = []
    for file, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and kind is ast.ClassDef and node.name == name:
                places.append(file)
            assigned = isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            )
            if assigned and kind is ast.Assign:
                places.append(file)
    return sorted(places)


def test_one_verdict_class_one_reference_type_and_one_mates_fraction() -> None:
    assert _defining(ast.ClassDef, "Verdict") == ["core/verdict.py"]
    assert _defining(ast.ClassDef, "Reference") == ["core/perf.py"]
    assert _defining(ast.Assign, "MATES_FRACTION") == ["core/perf.py"]
    assert _defining(ast.Assign, "MATES_FLOOR") == []


def test_the_training_and_the_node_checks_judge_mates_with_the_same_rule() -> None:
    for file in ("validate/node/perf.py", "workloads/controller/sweep.py"):
        names = {
            alias.name
            for node in ast.walk(TREES[file])
            if isinstance(node, ast.ImportFrom) and node.module == "gpuready.core.perf"
            for alias in node.names
        }
        assert "below_mates" in names, file


def test_the_launchers_do_not_import_the_controller() -> None:
    wrong = [
        f"{file}:{node.lineno}"
        for file, tree in TREES.items()
        if Path(file).parts[:2] == ("workloads", "launchers")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpuready.workloads.controller")
    ]
    assert not wrong, f"a launcher imports the controller: {wrong}"
