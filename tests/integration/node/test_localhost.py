"""validate gpu-node on this machine (ansible_connection: local), with or without a GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuready.validate.node.checks import CATALOGUE, CHECK_IDS
from tests.conftest import gpuready


def has_gpu() -> bool:
    return (
        shutil.which("nvidia-smi") is not None
        and subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False).returncode == 0
    )


def summary(artifacts: Path) -> dict:
    return json.loads(next(artifacts.glob("*/summary.json")).read_text())


def _expecting_gpus(folder: Path) -> Path:
    """This machine in an inventory whose node class expects a GPU (the shipped local one expects none)."""
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "hosts.yml").write_text(
        yaml.safe_dump(
            {"gpu_nodes": {"hosts": {"localhost": {"ansible_connection": "local", "gpuready_node_class": "one"}}}}
        )
    )
    settings = {"node_classes": {"one": {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 1}}}
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(
        yaml.safe_dump({"gpuready": {**settings, "driver": {"branch": "580"}, "container_runtime": "none"}})
    )
    return folder


def test_the_local_inventory_expects_no_gpu_so_the_gpu_checks_are_skipped_as_provisioning_skips_them(
    artifacts: Path,
) -> None:
    """The built-in inventory's node class has gpu_count 0: `provision cluster --check` installs no driver there,
    so `validate gpu-node` must not fail asking for one; it says why it judged nothing, on any machine."""
    done = gpuready("validate", "gpu-node", "-i", "inventories/local", "--artifacts", str(artifacts))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Install the driver" not in done.stdout + done.stderr
    checks = {c["id"]: c for c in summary(artifacts)["checks"]}
    assert list(checks) == CHECK_IDS
    assert not [i for i, c in checks.items() if c["status"] != "skipped"]
    no_gpu = {i for i, c in checks.items() if c["message"] == "the node class expects no GPU (gpu_count 0)"}
    assert {"driver.nouveau_absent", "driver.nvidia_module", "gpu.count", "node.container_runtime"} <= no_gpu
    # Only the fabric checks, which judge the node class's ports, are skipped for a reason of their own.
    assert set(CHECK_IDS) - no_gpu == {"node.ib_ports", "node.ib_flapping", "node.ats"}
    # At 80 columns the reason may be cut to keep the check ids whole; its words come first.
    assert "the node class expects no GPU" in done.stdout


def test_localhost_without_gpu_fails_driver_and_gpu_checks_clearly(tmp_path: Path, artifacts: Path) -> None:
    if has_gpu():
        pytest.skip("this machine has a GPU; test_real_gpu_host covers it")
    inventory = _expecting_gpus(tmp_path / "inventory")
    done = gpuready("validate", "gpu-node", "-i", str(inventory), "--artifacts", str(artifacts))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    checks = {c["id"]: c for c in summary(artifacts)["checks"]}
    assert list(checks) == CHECK_IDS  # everything ran, in catalogue order
    # One root cause, reported once: the driver is not loaded; what needs it is skipped and names it.
    assert [i for i, c in checks.items() if c["status"] == "failed"] == ["driver.nvidia_module"]
    assert not [c for c in checks.values() if c["status"] == "error"]
    assert checks["driver.nvidia_module"]["message"] == "the nvidia kernel module is not loaded"
    for definition in CATALOGUE:
        if definition.depends and definition.id != "driver.nvidia_module":
            assert checks[definition.id] == {
                **checks[definition.id],
                "status": "skipped",
                "message": "depends on driver.nvidia_module (the nvidia kernel module is not loaded)",
            }, definition.id
    assert checks["driver.nouveau_absent"]["status"] == "passed"
    assert all(checks[i]["status"] == "skipped" for i in ("topology.nvlink", "topology.p2p", "node.ib_ports"))


def test_skip_leaves_the_named_checks_out(artifacts: Path) -> None:
    skip = ["diag.dcgm", "perf.matmul_tflops", "perf.nccl_allreduce"]
    done = gpuready(
        "validate", "gpu-node", "-i", "inventories/local", "--skip", ",".join(skip), "--artifacts", str(artifacts)
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert [c["id"] for c in summary(artifacts)["checks"]] == [i for i in CHECK_IDS if i not in skip]


def test_bad_input_is_one_line_exit_2(artifacts: Path) -> None:
    done = gpuready(
        "validate", "gpu-node", "-i", "inventories/local", "--only", "gpu.nope", "--artifacts", str(artifacts)
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gpuready: error: --only: unknown check id(s) gpu.nope")
    done = gpuready(
        "validate", "gpu-node", "-i", "inventories/local", "--skip", "perf.nope", "--artifacts", str(artifacts)
    )
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith("gpuready: error: --skip: unknown check id(s) perf.nope")
    done = gpuready("validate", "gpu-node", "-i", "inventories/local", "--dcgm-level", "5")
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    done = gpuready("validate", "gpu-node", "-i", "inventories/local", "--limit", "nohost")
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    # inventories/local has no kube_control_plane host to mark nodes from; --check alone marks nothing.
    for flags, says in (
        (["--mark-nodes"], "--mark-nodes needs a host in group kube_control_plane"),
        (["--check"], "--check only applies to --mark-nodes"),
    ):
        done = gpuready("validate", "gpu-node", "-i", "inventories/local", *flags, "--artifacts", str(artifacts))
        assert (done.returncode, done.stderr.count("\n")) == (2, 1) and says in done.stderr, done.stderr


def test_real_gpu_host(tmp_path: Path, artifacts: Path) -> None:
    """On a GPU machine: describe it in an inventory; every check passes or is skipped with a reason."""
    if not has_gpu():
        pytest.skip("no NVIDIA GPU on this machine (nvidia-smi -L does not answer); runs on a GPU host")
    names = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()
    )
    model, driver = (p.strip() for p in names[0].split(","))
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "hosts.yml").write_text(
        yaml.safe_dump(
            {"gpu_nodes": {"hosts": {"localhost": {"ansible_connection": "local", "gpuready_node_class": "here"}}}}
        )
    )
    (tmp_path / "group_vars" / "all" / "gpuready.yml").write_text(
        yaml.safe_dump(
            {
                "gpuready": {
                    "node_classes": {"here": {"gpu_model": model, "gpu_count": len(names)}},
                    "driver": {"branch": driver.split(".")[0], "version": driver},
                    "container_runtime": "none",
                }
            }
        )
    )
    done = gpuready("validate", "gpu-node", "-i", str(tmp_path), "--artifacts", str(artifacts))
    checks = summary(artifacts)["checks"]
    bad = [(c["id"], c["status"], c["message"]) for c in checks if c["status"] not in ("passed", "skipped")]
    assert not bad, done.stdout
    assert all(c["message"] for c in checks if c["status"] == "skipped")
    assert done.returncode == 0


def test_a_hung_tool_is_stopped_by_the_per_host_timeout() -> None:
    """The batch runs under timeout(1): a command that hangs ends the host's run, it does not block it."""
    import time

    import testinfra

    from gpuready.core.settings import NodeClass
    from gpuready.validate.node.node import Node

    node = Node(
        "localhost",
        testinfra.get_host("local://"),
        NodeClass(gpu_count=0),
        None,  # type: ignore[arg-type]
        command_timeout=1,
    )
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="ran past 1s"):
        node.prefetch(["echo before", "sleep 30", "echo after"])
    assert time.monotonic() - started < 10


def test_batched_answers_equal_one_by_one() -> None:
    import testinfra

    from gpuready.core.settings import NodeClass
    from gpuready.validate.node.node import Node

    commands = ["printf 'a\\nb'", "echo out; echo err >&2; exit 3", "true", "printf ''", "cat", "printf 'e' >&2"]
    batched = Node("localhost", testinfra.get_host("local://"), NodeClass(gpu_count=0), None)  # type: ignore[arg-type]
    batched.prefetch(commands)
    for command in commands:
        alone = testinfra.get_host("local://").run(command)
        answer = batched.run(command)
        assert (answer.rc, answer.stdout, answer.stderr) == (alone.rc, alone.stdout, alone.stderr), command


def test_the_probe_travels_in_the_batch_and_runs_with_the_nodes_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # The probe is sent as a here-document inside the measuring batch and run by the python3 on the node's
    # PATH; here that is this venv's (torch installed, no GPU): the probe answers that torch sees no CUDA.
    import os
    import sys

    import testinfra

    from gpuready.core.settings import NodeClass
    from gpuready.validate.node import checks, tool_output
    from gpuready.validate.node.node import Node

    if has_gpu():
        pytest.skip("this machine has a GPU: the probe would measure it (test_real_gpu_host)")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    node = Node("localhost", testinfra.get_host("local://"), NodeClass(gpu_count=0), None)  # type: ignore[arg-type]
    node.prefetch([checks.PROBE_COMMAND], timeout=checks.PROBE_TIMEOUT)
    answer = node.run(checks.PROBE_COMMAND)
    assert answer.rc == 0, answer.stderr
    data = tool_output.probe(answer.stdout)
    assert data["device"] == "cuda" and "torch.cuda.is_available() is False" in data["no_cuda"]


def test_become_runs_the_batch_as_the_become_user() -> None:
    """ansible_become: the node's commands run through sudo as ansible_become_user, as Ansible would run them."""
    import functools
    import os

    import testinfra

    from gpuready.core.inventory import connection
    from gpuready.core.settings import NodeClass
    from gpuready.validate.node.node import Node

    if os.geteuid() != 0 or not shutil.which("sudo"):
        pytest.skip("needs root and sudo (scripts/install-system-deps installs sudo)")
    spec = connection.connection_spec(
        "localhost",
        {"ansible_connection": "local", "ansible_become": True, "ansible_become_user": "nobody"},
        environ={},
    )
    node = Node(
        "localhost",
        testinfra.get_host("local://"),
        NodeClass(gpu_count=0),
        None,  # type: ignore[arg-type]
        wrap=functools.partial(connection.become, spec),
    )
    node.prefetch(["id -un", "echo err >&2; exit 4"])
    assert node.run("id -un").stdout.strip() == "nobody"
    assert (node.run("echo err >&2; exit 4").rc, node.run("echo err >&2; exit 4").stderr) == (4, "err\n")
