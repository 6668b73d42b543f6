"""Table of bad inputs: each is one line on stderr, no traceback, and the documented exit code."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, gpuready

GOOD = {
    "node_classes": {"v100": {"gpu_model": "Tesla V100-SXM2-32GB", "gpu_count": 4}},
    "driver": {"branch": "580"},
}


def make_inventory(tmp: Path, hosts: object = None, settings: object = None) -> Path:
    inv = tmp / "inv"
    (inv / "group_vars" / "all").mkdir(parents=True)
    hosts = hosts if hosts is not None else {"gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}}}
    (inv / "hosts.yml").write_text(hosts if isinstance(hosts, str) else yaml.safe_dump(hosts))
    body = settings if settings is not None else {"gpuready": GOOD}
    (inv / "group_vars" / "all" / "gpuready.yml").write_text(body if isinstance(body, str) else yaml.safe_dump(body))
    return inv


#: The Kubernetes lab's shape: kwok nodes with a local connection, under gpu_nodes' kube_only_nodes.
KUBE_ONLY = {
    "gpu_nodes": {
        "children": {"kube_only_nodes": {"hosts": {n: {"ansible_connection": "local"} for n in ("kwok-0", "kwok-1")}}}
    }
}
MIXED = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}, **KUBE_ONLY["gpu_nodes"]}}


def with_settings(**changes: object) -> dict[str, object]:
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    for dotted, value in changes.items():
        node = data
        *path, last = dotted.split("__")
        for key in path:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return {"gpuready": data}


Case = Callable[[Path], list[str]]
CASES: dict[str, tuple[Case, int, str]] = {
    "missing inventory": (lambda t: ["inventory", "check", "-i", str(t / "nope")], 2, "inventory not found"),
    "folder without hosts.yml": (lambda t: ["inventory", "check", "-i", str(t)], 2, "no hosts.yml"),
    "malformed hosts YAML": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, hosts="gpu_nodes:\n  hosts: [a\n"))],
        2,
        "hosts.yml:",
    ),
    "malformed settings YAML": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, settings="gpuready:\n  driver: {branch: \n"))],
        2,
        "gpuready.yml:",
    ),
    "unknown group": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, hosts={"gpu_node": {"hosts": {"a": None}}}))],
        2,
        "unknown group 'gpu_node'",
    ),
    "unknown settings key": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, settings=with_settings(driver__brnch="5")))],
        2,
        "gpuready.driver.brnch: unknown key",
    ),
    "unknown top-level key in the settings file": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, settings={"gpuready": GOOD, "typo": 1}))],
        2,
        "unknown key 'typo'",
    ),
    "wrong type": (
        lambda t: inventory_check(make_inventory(t, settings=with_settings(node_classes__v100__gpu_count="four"))),
        2,
        "gpuready.node_classes.v100.gpu_count",
    ),
    "wrong type of a boolean": (
        lambda t: inventory_check(make_inventory(t, settings=with_settings(driver__allow_reboot="sometimes"))),
        2,
        "gpuready.driver.allow_reboot",
    ),
    "missing required value": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, settings=with_settings(driver=None)))],
        2,
        "gpuready.driver: missing required value",
    ),
    "missing settings variable": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t, settings={"other": 1}))],
        2,
        "missing required variable 'gpuready'",
    ),
    "unknown gpuready host variable": (
        lambda t: inventory_check(
            make_inventory(t, hosts={"gpu_nodes": {"hosts": {"gpu01": {"gpuready_node_klass": "v100"}}}})
        ),
        2,
        "unknown variable 'gpuready_node_klass'",
    ),
    "node class that does not exist": (
        lambda t: inventory_check(
            make_inventory(t, hosts={"gpu_nodes": {"hosts": {"gpu01": {"gpuready_node_class": "a100"}}}})
        ),
        2,
        "gpuready_node_class 'a100' is not one of",
    ),
    "unknown --tags": (
        lambda t: a_run(t, "provision cluster", "--check", "--tags", "preflight,nope"),
        2,
        "unknown tag(s) nope",
    ),
    "--limit matching no host": (
        lambda t: a_run(t, "provision cluster", "--check", "--limit", "gpu99"),
        2,
        "--limit 'gpu99' matches no host",
    ),
    "unknown option": (lambda t: ["provision", "cluster", "--chek"], 2, "No such option"),
    "unknown command": (lambda t: ["provison"], 2, "No such command"),
    "a value out of range": (lambda t: ["validate", "training", "--steps", "0"], 2, "--steps"),
    "a flag of the wrong type": (lambda t: ["provision", "cluster", "--limit"], 2, "--limit"),
    "bytes that are not UTF-8 in hosts.yml": (
        lambda t: inventory_check(raw_file(make_inventory(t), "hosts.yml", b"gpu_nodes:\n  hosts:\n    gpu\xe901:\n")),
        2,
        "hosts.yml:3: not UTF-8",
    ),
    "bytes that are not UTF-8 in group_vars": (
        lambda t: inventory_check(raw_file(make_inventory(t), "group_vars/all/site.yml", b"# caf\xe9\nntp: pool\n")),
        2,
        "site.yml:1: not UTF-8",
    ),
    "a YAML alias bomb in group_vars": (
        lambda t: inventory_check(raw_file(make_inventory(t), "group_vars/all/bomb.yml", ALIAS_BOMB.encode())),
        2,
        "alias bomb",
    ),
    "a YAML alias that refers to itself": (
        lambda t: inventory_check(raw_file(make_inventory(t), "group_vars/all/loop.yml", b"a: &x [1, *x]\n")),
        2,
        "loop.yml",
    ),
    "the same host twice in hosts.yml": (
        lambda t: inventory_check(
            raw_file(
                make_inventory(t),
                "hosts.yml",
                (b"gpu_nodes:\n  hosts:\n    gpu01: {ansible_host: 10.0.0.1}\n    gpu01: {ansible_host: 10.0.0.2}\n"),
            )
        ),
        2,
        "hosts.yml:4: malformed YAML: duplicate key 'gpu01' (first at line 3",
    ),
    "a host in no gpuready group": (
        lambda t: inventory_check(
            make_inventory(
                t,
                hosts={
                    "all": {"hosts": {"stray": None}},
                    "gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}},
                },
            )
        ),
        2,
        "host 'stray' is in no gpuready group",
    ),
    "a host under ungrouped": (
        lambda t: inventory_check(
            make_inventory(t, hosts={"ungrouped": {"hosts": {"stray": None}}, "gpu_nodes": {"hosts": {"gpu01": None}}})
        ),
        2,
        "host 'stray' is in no gpuready group",
    ),
    "--limit with a regular expression that does not compile": (
        lambda t: a_run(t, "provision cluster", "--check", "--limit", "~[unclosed"),
        2,
        "not a valid regular expression",
    ),
    "--limit empty": (
        lambda t: a_run(t, "provision cluster", "--check", "--limit", ""),
        2,
        "--limit '': empty pattern",
    ),
    "--limit only commas": (
        lambda t: a_run(t, "validate gpu-node", "--limit", ",,"),
        2,
        "empty pattern",
    ),
    "--limit with a broken subscript": (
        lambda t: a_run(t, "validate gpu-node", "--limit", "gpu_nodes[1:x]"),
        2,
        "--limit 'gpu_nodes[1:x]'",
    ),
    "gpu-node against nodes reached only through the Kubernetes API": (
        lambda t: a_run(t, "validate gpu-node", hosts=KUBE_ONLY),
        2,
        "(kwok-0, kwok-1) are in group kube_only_nodes, reached only through the Kubernetes API",
    ),
    "gpu-node --limit to a node reached only through the Kubernetes API": (
        lambda t: a_run(t, "validate gpu-node", "--limit", "kwok-1", hosts=MIXED),
        2,
        "(kwok-1) are in group kube_only_nodes",
    ),
    "--host-timeout nan": (
        lambda t: ["validate", "gpu-node", "-i", str(make_inventory(t)), "--host-timeout", "nan"],
        2,
        "--host-timeout",
    ),
    "--gpus absurdly large": (
        lambda t: a_run(t, "validate training", "--gpus", "99999999999999999999999"),
        2,
        "--gpus '99999999999999999999999': give worker counts of 1 or more, at most",
    ),
    "--gpus with empty items": (
        lambda t: a_run(t, "validate training", "--gpus", "1,,2,"),
        2,
        "--gpus '1,,2,': an empty item",
    ),
    "--gpus with a duplicate": (
        lambda t: a_run(t, "validate training", "--gpus", "2,1,2"),
        2,
        "given twice",
    ),
    "--artifacts that is a file": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t)), "--artifacts", str(a_file(t))],
        2,
        "--artifacts",
    ),
    "--artifacts under a file": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t)), "--artifacts", str(a_file(t) / "runs")],
        2,
        "--artifacts",
    ),
    "--artifacts empty": (
        lambda t: ["inventory", "check", "-i", str(make_inventory(t)), "--artifacts", ""],
        2,
        "--artifacts",
    ),
    "lab status --lab-dir empty": (lambda t: ["lab", "status", "--lab-dir", ""], 2, "--lab-dir"),
    "lab status --lab-dir that is a file": (lambda t: ["lab", "status", "--lab-dir", str(a_file(t))], 2, "--lab-dir"),
    "lab down --lab-dir under a file": (lambda t: ["lab", "down", "--lab-dir", str(a_file(t) / "lab")], 2, "--lab-dir"),
    "lab up --components empty": (
        lambda t: ["lab", "up", "--components", "", "--lab-dir", str(t / "lab")],
        2,
        "--components ''",
    ),
    "lab nodes prefix an interface cannot have": (
        lambda t: ["lab", "up", "--components", "nodes", "--set", "nodes.prefix=g/x", "--lab-dir", str(t / "lab")],
        2,
        "prefix 'g/x'",
    ),
}

#: Nine levels of ten aliases: a billion strings once expanded, a few hundred bytes on disk.
ALIAS_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{', '.join(['*' + chr(ord('a') + i - 1)] * 10)}]\n"
    for i in range(1, 9)
)


def inventory_check(inventory: Path) -> list[str]:
    return ["inventory", "check", "-i", str(inventory)]


def a_run(t: Path, command: str, *options: str, hosts: object = None) -> list[str]:
    """``command`` (``provision cluster``, say) on a new inventory, with ``options`` and --artifacts under ``t``."""
    return [*command.split(), "-i", str(make_inventory(t, hosts=hosts)), *options, "--artifacts", str(t / "runs")]


def raw_file(inv: Path, name: str, content: bytes) -> Path:
    (inv / name).write_bytes(content)
    return inv


def a_file(tmp: Path) -> Path:
    path = tmp / "a-file"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_its_exit_code(name: str, tmp_path: Path) -> None:
    argv, code, text = CASES[name]
    done = gpuready(*argv(tmp_path))
    assert done.returncode == code, done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    assert text in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuready: error: "), done.stderr


def test_an_unreachable_host_is_an_error_for_that_host_and_exit_3(tmp_path: Path) -> None:
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    hosts = {
        "gpu_nodes": {
            "hosts": {
                "here": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
                "gone": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody"},
            }
        }
    }
    settings = with_settings(node_classes__v100__gpu_count=0, preflight={"min_free_disk_gib": 0})
    inv = make_inventory(tmp_path, hosts=hosts, settings=settings)
    done = gpuready("provision", "cluster", "-i", str(inv), "--check", "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    summary = next((tmp_path / "runs").glob("*/summary.json")).read_text()
    import json

    checks = {(c["host"], c["id"]): c for c in json.loads(summary)["checks"]}
    assert checks[("gone", "provision.reach")]["status"] == "error"
    assert "unreachable" in checks[("gone", "provision.reach")]["message"]
    assert checks[("here", "provision.apply")]["status"] == "passed"


@pytest.mark.parametrize(
    "inventory", sorted(p.name for p in (ROOT / "inventories").iterdir() if p.is_dir() and p.name != "__pycache__")
)
def test_every_shipped_inventory_passes_check(inventory: str, tmp_path: Path) -> None:
    done = gpuready("inventory", "check", "-i", f"inventories/{inventory}", "--artifacts", str(tmp_path))
    assert done.returncode == 0, done.stderr


def test_gpu_node_leaves_out_nodes_reached_only_through_the_kubernetes_api(tmp_path: Path) -> None:
    """Beside a host it can log in to, the kwok nodes' local connection must not run the checks here."""
    import json

    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    gone = {"gpu01": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody"}}
    hosts = {"gpu_nodes": {"hosts": gone, **KUBE_ONLY["gpu_nodes"]}}
    inv = make_inventory(tmp_path, hosts=hosts)
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert "Traceback" not in done.stderr + done.stdout
    assert "2 host(s) of kube_only_nodes left out (kwok-0, kwok-1)" in done.stderr + done.stdout
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert {c["host"] for c in summary["checks"]} == {"gpu01"}
    assert summary["metrics"]["hosts"] == 1
