"""Who may import whom (ARCHITECTURE, "Layers"): provision, validate and workloads build on core; nothing
imports the optional lab but the CLI's `lab` group; library code leaves process state alone."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

MAPPING: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
PACKAGE = re.compile(r"^gpuready\.(core|provision|validate|workloads|lab|playbooks|inventories|docs)\b(?:\.(\w+))?")
# What each layer may import besides itself and gpuready.core. validate training drives the workloads.
ALLOWED = {
    # the shipped collection, default inventory and manual, found as data
    "core": {"playbooks", "inventories", "docs"},
    "provision": set(),
    "validate": {"workloads"},
    "workloads": set(),
    "lab": {"provision", "validate", "workloads"},
    "playbooks": set(),
    "inventories": set(),
    "docs": set(),
}
# The CLI registers every command group by dotted name; only it may name the others.
CLI = {("core", "cli.py"): {"provision", "validate", "workloads", "lab"}}


def _layer_files() -> list[tuple[str, Path]]:
    files = []
    for package, folder in MAPPING.items():
        layer = package.split(".")[1]
        base = ROOT / folder
        nested = [ROOT / f for p, f in MAPPING.items() if p != package and (ROOT / f).is_relative_to(base)]
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts or any(path.is_relative_to(n) for n in nested):
                continue
            files.append((layer, path))
    return files


def _named_layers(path: Path) -> set[tuple[str, int]]:
    """Layers this file imports, or names as a dotted string (lazy imports, entry points)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        for name in names:
            match = PACKAGE.match(name)
            if match:
                found.add((match.group(1), node.lineno))
    return found


FILES = _layer_files()


def test_every_layer_is_mapped() -> None:
    assert {"core", "provision", "validate", "workloads", "lab", "playbooks"} <= {p.split(".")[1] for p in MAPPING}


@pytest.mark.parametrize(("layer", "path"), FILES, ids=[str(p.relative_to(ROOT)) for _, p in FILES])
def test_imports_follow_the_layers(layer: str, path: Path) -> None:
    allowed = {layer, "core"} | ALLOWED[layer] | CLI.get((layer, path.name), set())
    wrong = sorted({f"gpuready.{name} (line {line})" for name, line in _named_layers(path) if name not in allowed})
    assert not wrong, f"{path.relative_to(ROOT)} ({layer}) must not import {', '.join(wrong)}"


#: validate training drives the workloads through this one module; the rest of workloads may move behind it.
WORKLOADS_ENTRY = "gpuready.workloads.smoke_run"


def _workloads_names(path: Path) -> set[tuple[str, int]]:
    """Every gpuready.workloads module this file imports or names, with the imported names spelled out."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        found |= {(name, node.lineno) for name in names if re.match(r"gpuready\.workloads\b", name)}
    return found


def test_validate_reaches_the_workloads_through_one_module() -> None:
    validate = [p for layer, p in FILES if layer == "validate"]
    wrong = sorted(
        f"{p.relative_to(ROOT)}:{line}: {name}"
        for p in validate
        for name, line in _workloads_names(p)
        if name != WORKLOADS_ENTRY and not name.startswith(WORKLOADS_ENTRY + ".")
    )
    assert any(_workloads_names(p) for p in validate), "validate training no longer drives the workloads?"
    assert not wrong, f"validate reaches into gpuready.workloads past {WORKLOADS_ENTRY}: {wrong}"


#: Programs that run as processes of their own, not as library code: a training worker (torchrun starts it) and the
#: GPU probe (sent to a node and run there by its python3). Their main() may set what torch reads from the
#: environment before torch is imported (the compile cache's folder, CUDA's device order).
WORKER_ENTRY_POINTS = {"workloads/pytorch/train.py", "validate/node/gpu_probe.py"}
LIBRARY = [
    (layer, p)
    for layer, p in FILES
    if layer != "lab"
    and p.name not in ("cli.py", "__main__.py")
    and not p.name.endswith("_cli.py")
    and str(p.relative_to(ROOT)) not in WORKER_ENTRY_POINTS
]
MUTATION = re.compile(
    r"os\.environ\[[^]]+\]\s*=(?!=)|os\.environ\.(update|setdefault|pop|clear)\("
    r"|os\.putenv|os\.chdir\(|\bC\.[A-Z_]+\s*="
)


@pytest.mark.parametrize(("layer", "path"), LIBRARY, ids=[str(p.relative_to(ROOT)) for _, p in LIBRARY])
def test_library_code_leaves_process_state_alone(layer: str, path: Path) -> None:
    hits = [
        f"line {n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1) if MUTATION.search(line)
    ]
    assert not hits, f"{path.relative_to(ROOT)} changes os.environ, cwd or ansible.constants: {hits}"


def _module_files() -> dict[str, Path]:
    """Every gpuready module, by dotted name, from pyproject's package-dir mapping."""
    modules: dict[str, Path] = {}
    for package, folder in MAPPING.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules.setdefault(".".join([package, *parts]), path)
    return modules


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: imports that never run, so never part of a circle."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for statement in node.body for n in ast.walk(statement)}
    return skipped


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Who imports whom among ``modules``: every import statement, at the top or inside a function (an import
    inside a function only postpones a circle), except those under ``if TYPE_CHECKING:``."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped = _type_checking_only(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([*component, v]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_others() -> None:
    """Inside a layer too (core's report writers and the terminal verdict, say): a circle held together by an
    import inside a function is still a circle."""
    found = circles(import_graph(_module_files()))
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_planted_circle_is_found_even_through_an_import_inside_a_function(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from gpuready.core.b import x\n")
    b.write_text("def late():\n    from gpuready.core.a import y\n")
    c.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuready.core.a import y\n")
    modules = {"gpuready.core.a": a, "gpuready.core.b": b, "gpuready.core.c": c}
    assert circles(import_graph(modules)) == [["gpuready.core.a", "gpuready.core.b"]]
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuready.core.a import y\n")
    assert circles(import_graph(modules)) == []
