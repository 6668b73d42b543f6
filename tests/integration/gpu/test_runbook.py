"""The GPU runbook on a machine without a GPU: it refuses clearly, and its recorder and probes work on
what can be had here (replayed nvidia-smi, the CPU)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.core import inventory
from gpuready.core.results import Check, RunResult, failed, passed
from gpuready.lab import replay
from gpuready.validate.node.checks import (
    NCCL_COMMAND,
    NVBANDWIDTH_COMMAND,
    PREFETCH,
    PROBE_COMMAND,
    perf_commands,
    run_catalogue,
)
from gpuready.validate.node.checks.commands import SAMPLES
from gpuready.validate.node.node import Node
from tests.conftest import ROOT, require
from tests.unit.node.test_recorded_machines import recorded_answers

GPU = ROOT / "benchmarks" / "gpu"
sys.path.insert(0, str(GPU))
import probe  # noqa: E402


def _probe(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """gpu/probe.py with ``args``, from the repository's root."""
    return subprocess.run(
        [sys.executable, str(GPU / "probe.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def _record(args: list[str], path: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """gpu/record.py with ``args``, its PATH ``path``."""
    return subprocess.run(
        [sys.executable, str(GPU / "record.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=timeout,
        check=False,
    )


def _runbook(tmp_path: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPU / "runbook.sh"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": path, **env},
        check=False,
    )


def test_refuses_in_one_line_without_nvidia_smi(tmp_path: Path) -> None:
    done = _runbook(tmp_path, "/usr/bin:/bin")
    assert done.returncode == 3
    assert done.stderr.strip() == "runbook: no nvidia-smi on this machine: run the runbook on a GPU machine"
    assert not (tmp_path / "out").exists()


def test_refuses_when_torch_sees_no_cuda_device(tmp_path: Path) -> None:
    tools = replay.build("h100-x8", tmp_path / "replay")
    done = _runbook(tmp_path, f"{tools}:/usr/bin:/bin", PYTHON=sys.executable)
    assert done.returncode == 3
    assert done.stderr.startswith("runbook: torch on ") and "sees no CUDA device" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def torch_venv_without_gpuready(tmp_path: Path) -> Path:
    """A venv that holds torch and its dependencies but not gpuready, as GPU images keep torch in one
    (/opt/torch/.venv on the lent H100): this environment's packages, linked in, gpuready's left out."""
    require(importlib.util.find_spec("torch"), "torch not installed (make .venv/.stamp-torch)")
    venv = tmp_path / "torch-venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    ours = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "torch").is_dir()))
    theirs = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for entry in ours.iterdir():
        if "gpuready" not in entry.name and not entry.name.startswith("__editable__") and entry.suffix != ".pth":
            (theirs / entry.name).symlink_to(entry)
    return venv / "bin" / "python"


def test_wheels_installed_beside_a_torch_venv_see_its_torch(tmp_path: Path, gpuready_wheel: Path) -> None:
    # A venv made from a venv sees the base interpreter's packages, not torch: the runbook must still reach
    # its CUDA question with torch imported in the venv every step uses.
    python = torch_venv_without_gpuready(tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / gpuready_wheel.name).symlink_to(gpuready_wheel)
    tools = replay.build("h100-x8", tmp_path / "replay")
    done = _runbook(tmp_path, f"{tools}:/usr/bin:/bin", PYTHON=str(python), WHEELS=str(wheels))
    assert done.returncode == 3
    assert done.stderr.strip() == (
        f"runbook: torch on {tmp_path}/out/.venv/bin/python sees no CUDA device (0): install a CUDA build of torch"
    )


def test_recorder_saves_every_catalogue_command_raw_with_its_source(tmp_path: Path) -> None:
    # The replayed tools of an 8x H100 node (nvbandwidth among them) and this machine's real torch, which has no
    # GPU to use: the measuring batch runs for real and its answers are what the machine gave.
    require(importlib.util.find_spec("torch"), "torch not installed (make .venv/.stamp-torch)")
    tools = replay.build("h100-x8", tmp_path / "replay")
    out = tmp_path / "recorded"
    done = _record(
        [str(out), "--note", "idle"], path=f"{tools}:{Path(sys.executable).parent}:{os.environ['PATH']}", timeout=600
    )
    assert done.returncode == 0, done.stderr
    index = json.loads((out / "commands.json").read_text())
    assert set(PREFETCH) <= set(index)
    data = tmp_path / "replay" / "data"
    assert (out / index["nvidia-smi -q -x"]["stdout"]).read_bytes() == (data / "q.xml").read_bytes()
    assert (out / index["nvidia-smi nvlink -s"]["stdout"]).read_bytes() == (data / "nvlink.txt").read_bytes()
    assert (out / index["nvidia-smi topo -p2p r"]["stdout"]).read_bytes() == (data / "p2p.txt").read_bytes()
    source = (out / "SOURCE.md").read_text()
    assert "8x NVIDIA H100 80GB HBM3" in source and "driver: 535.54.03" in source and "- date: " in source
    assert "- state: idle" in source
    facts = json.loads((out / "facts.json").read_text())
    assert (facts["gpu_model"], facts["gpu_count"], facts["driver"]) == ("NVIDIA H100 80GB HBM3", 8, "535.54.03")
    # The measuring batch gpu-node sends under the written inventory's settings, after the fixed batch.
    settings = inventory.load(out / "inventory").settings
    measuring = [c for c, files in index.items() if files["batch"] == "perf"]
    assert measuring == perf_commands(settings) and list(index)[-len(measuring) :] == measuring
    answers = recorded_answers(out)
    nvbandwidth = answers[NVBANDWIDTH_COMMAND].stdout
    assert nvbandwidth.count((data / "nvbandwidth.txt").read_text()) == SAMPLES  # one copy per sample
    assert answers[NCCL_COMMAND].stdout == "== not installed\n"
    assert json.loads(answers[PROBE_COMMAND].stdout)["no_cuda"]  # torch ran and found no GPU
    # Replayed, the catalogue judges the recorded batch as gpu-node judged it live.
    node = Node.recorded("localhost", inventory.load(out / "inventory").node_class("localhost"), settings, answers)
    verdicts = {c.id: c for c in run_catalogue(node)}
    assert verdicts["perf.h2d_bandwidth"].status == "passed"
    assert f"measured by {tools}/nvbandwidth -t host_to_device" in verdicts["perf.h2d_bandwidth"].evidence
    matmul = verdicts["perf.matmul_tflops"]
    assert matmul.status == "skipped" and "pip install torch built for CUDA" in matmul.message


def test_recorder_writes_the_inventory_alone_when_asked(tmp_path: Path) -> None:
    tools = replay.build("a100-x4", tmp_path / "replay")
    done = _record(["--inventory-only", str(tmp_path / "out")], path=f"{tools}:{os.environ['PATH']}", timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["inventory"]
    inv = inventory.load(tmp_path / "out" / "inventory")
    node_class = inv.node_class("localhost")
    assert (node_class.gpu_model, node_class.gpu_count) == ("NVIDIA A100-PCIE-40GB", 4)


def test_recorder_refuses_without_nvidia_smi(tmp_path: Path) -> None:
    done = _record([str(tmp_path / "r")], path="/usr/bin:/bin", timeout=60)
    assert done.returncode == 3 and done.stderr.startswith("record: no working nvidia-smi here")


def test_peaks_and_mfu() -> None:
    assert probe.peak_tflops("NVIDIA H100 80GB HBM3") == 989.5
    assert probe.peak_tflops("NVIDIA H100 PCIe") == 756.5
    assert probe.peak_tflops("NVIDIA H100 NVL") == 835.5
    assert probe.peak_tflops("NVIDIA H200") == 989.5
    assert probe.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert probe.peak_tflops("Tesla V100-SXM2-32GB") is None  # no bf16 Tensor Cores
    # 2,000 images/s x 17 GFLOP = 34 TFLOP/s: 3.4% of an H100 SXM
    assert probe.mfu(2000, 17e9, 989.5) == pytest.approx(34 / 989.5)
    summary = {
        "metrics": {
            "training": {
                "gpu_model": "NVIDIA H100 80GB HBM3",
                "mixed_precision": True,
                "sizes": [{"workers": 1, "images_per_second": 2000.0}],
            }
        }
    }
    figures = probe.figures(summary, {"gflops": 17.0, "training_flops_per_image": 17e9})
    assert figures["mfu"] == round(34 / 989.5, 4) and figures["precision"] == "bf16"
    untrained = {"checks": [{"id": "training.1w.trained", "status": "failed"}], "metrics": {}}
    assert probe.figures(untrained, {"gflops": 17.0}) == {
        "passed": False,
        "reason": "no training figures: no size trained",
        "checks": {"training.1w.trained": "failed"},
    }


def cpu_probe(*args: str) -> dict:
    """probe.py on this machine's CPU (the probes that need no GPU): its JSON answer."""
    require(importlib.util.find_spec("torchvision"), "torch and torchvision not installed (make .venv/.stamp-torch)")
    done = _probe(*args, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_pipeline_probe_measures_images_per_core_on_the_cpu() -> None:
    result = cpu_probe("pipeline", "--images", "48", "--workers", "1", "--batches", "2")
    assert result["images_per_second_per_core"]["1"] > 0


def test_shards_probe_writes_what_training_reads(tmp_path: Path) -> None:
    written = cpu_probe("shards", str(tmp_path / "shards"), "--images", "8", "--shards", "2")
    files = sorted((tmp_path / "shards").glob("train-*.tfrecord"))
    assert (written["images"], written["shards"], len(files)) == (8, 2, 2)
    assert written["bytes"] == sum(f.stat().st_size for f in files)
    # torch in a child process: in pytest's own, Ansible's patch of sys.intern breaks torch._dynamo's import.
    read = (
        "from gpuready.workloads.pytorch import data as t; "
        "from gpuready.workloads.dataset.reading import Reading; "
        f"f = t.shard_files({str(tmp_path / 'shards')!r}, 'train'); "
        "i, l = next(iter(t.new(f, Reading(4, 32), loader_workers=0))); "
        "print(len(f), tuple(i.shape), tuple(l.shape))"
    )
    done = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "2 (4, 3, 32, 32) (4, 14)"


def plan(tmp_path: Path, name: str, **env: str) -> tuple[list[str], list[str]]:
    """PLAN=1 runbook.sh: its headlines and the commands it would run."""
    done = subprocess.run(
        [str(GPU / "runbook.sh"), str(tmp_path / name)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PLAN": "1", "PATH": "/usr/bin:/bin", **env},  # no GPU, no nvidia-smi: a plan needs neither
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / name).exists()  # a plan writes nothing
    lines = done.stdout.splitlines()
    return [ln for ln in lines if ln.startswith("runbook: ")], [ln[4:] for ln in lines if ln.startswith("  $ ")]


def test_plan_lists_every_step_in_order_with_the_noisy_neighbour_between_its_runs(tmp_path: Path) -> None:
    # A first compile of 40 s: the neighbour, DCGM, the plain loop with its compiled variant and the eager smoke run
    # all fit in the budget less its margin.
    steps, commands = plan(tmp_path, "out", COMPILE_S="40")
    out = tmp_path / "out"

    def at(words: str, start: int = 0) -> int:
        return next(i for i, c in enumerate(commands) if i >= start and words in c)

    assert commands[0].endswith(f"record.py --inventory-only {out}")  # what every later step's -i names
    # the idle GPU's recording right before its gpu-node run (the fixtures pair them), then the first smoke run
    record, idle_node = at(f"record.py {out}/recorded --note idle"), at(f"--artifacts {out}/gpu-node")
    first = at("validate training")
    assert record + 1 == idle_node < first
    assert "--gpus 1 --mixed-precision" in commands[first] and "--batch-size 256" in commands[first]
    start = at("probe.py noisy --ready")
    busy_train = at("training-busy")
    busy_record = at(f"record.py {out}/recorded-busy --note busy")
    busy_node = at(f"-i {out}/inventory --artifacts {out}/gpu-node-busy")
    joined, stop = at("wait <the smoke run>"), at("kill <the neighbour>")
    verdict = at("probe.py noisy-verdict")
    dcgm = at("dcgmi diag -r memory_bandwidth,pcie -j")
    # The neighbour comes right after the first smoke run (its compile cached, no second cold one) and before DCGM;
    # the busy smoke run starts beside the recorder and gpu-node, all three under the neighbour, which is stopped
    # once the three are done and before anything else measures; the verdict compares them with the idle runs.
    assert first < start < busy_train < busy_record < busy_node < joined < stop < verdict < dcgm
    assert "--eager" not in commands[busy_train]
    assert commands[verdict].endswith("--idle gpu-node,training-b256")
    plain, eager = at("probe.py baseline --batch-size 256 --steps 50"), at("--eager")
    assert dcgm < plain < eager and commands[plain].endswith("--variants eager,fused,compiled")
    assert commands[-1] == f"rm -rf {out}/.venv {out}/.cache"  # the compile cache goes too
    assert [s.split()[1] for s in steps if s.split()[1][0].isdigit()] == [
        "1/8",
        "2/8",
        "3/8",
        "4/8",
        "5/8",
        "6/8",
        "7/8",
        "7/8",
    ]
    # the neighbour's step costs its longer lane (recorder then gpu-node: 45 s) and the neighbour's start, not the sum
    assert any(s.startswith("runbook: 5/8 noisy neighbour") and s.endswith("(~50s, at ~133s)") for s in steps)
    # an optional step's time limit is what was left of the budget (less the margin) when it started
    assert f"--timeout 197 --artifacts {out}/training-busy" in commands[busy_train]
    assert commands[plain].startswith("timeout -k 5 102 ") and "--timeout 37 " in commands[eager]
    # the plan's clock is the sum of the steps' estimates, judged against the budget less its margin on the last line
    estimates = [int(s.split("(~")[1].split("s,")[0]) for s in steps if "(~" in s]
    assert sum(estimates) == 323 <= 330
    assert steps[-1] == f"runbook: plan: ~323s of the 360s budget (30s kept as margin): {out}"


def test_plan_fits_one_h200_with_its_margin(tmp_path: Path) -> None:
    # A first compile as long as the plain loop's on the H100 (173 s; the H200 is the same processor): the steps that
    # always run and the noisy neighbour fit in the 360 s budget less its 30 s margin, and the optional steps that
    # would pass it (DCGM, which the lent machine does not have, the plain loop, the eager run) are skipped, saying so.
    steps, commands = plan(tmp_path, "slow")
    estimates = [int(s.split("(~")[1].split("s,")[0]) for s in steps if "(~" in s]
    assert sum(estimates) == 316 and sum(estimates) <= 360 - 30
    assert any("probe.py noisy --ready" in c for c in commands)
    assert any("probe.py noisy-verdict" in c and c.endswith("--idle gpu-node,training-b256") for c in commands)
    assert not any("dcgmi" in c or "probe.py baseline" in c or "--eager" in c for c in commands)
    assert "runbook: skipped dcgm: needs ~45s, 14s of the 360s budget left (30s kept as margin)" in steps
    assert steps[-1] == (
        f"runbook: plan: ~316s of the 360s budget (30s kept as margin); skipped: dcgm, plain-loop, training-eager: "
        f"{tmp_path}/slow"
    )
    # The busy smoke run reads the first run's compile back: one cold compile in the whole plan.
    assert [c for c in commands if "validate training" in c and "--eager" not in c] == [
        c for c in commands if "validate training" in c
    ]
    assert sum("validate training" in c for c in commands) == 2
    # DCGM's step is stopped at its own limit or at what is left, and left out when asked
    _, roomy_dcgm = plan(tmp_path, "dcgm", COMPILE_S="100")
    dcgm = next(c for c in roomy_dcgm if "dcgmi diag" in c)
    assert "timeout -k 5 87 dcgmi diag -r memory_bandwidth,pcie -j" in dcgm and "/dcgm/diag.json" in dcgm
    _, without = plan(tmp_path, "no-dcgm", DCGM="0", COMPILE_S="100")
    assert not any("dcgmi" in c for c in without)
    # With time to spare every variant runs, the compiled one included, and DCGM stops at its own limit.
    _, roomy = plan(tmp_path, "roomy", BUDGET_S="1000")
    assert any(c.endswith("--variants eager,fused,compiled") for c in roomy)
    assert any("timeout -k 5 90 dcgmi diag" in c for c in roomy)
    # Every smoke run eager: no compile to wait for, and the plan is shorter still.
    eager_steps, eager = plan(tmp_path, "eager", EAGER="1", BASELINE="0", DCGM="0")
    assert eager_steps[-1] == f"runbook: plan: ~143s of the 360s budget (30s kept as margin): {tmp_path}/eager"
    trainings = [c for c in eager if "validate training" in c]
    assert len(trainings) == 2 and all(c.endswith(" --eager") for c in trainings)
    assert any("probe.py noisy --ready" in c for c in eager)
    # The opt-in steps appear when asked for; without the neighbour, gpu-node runs once, after the recorder.
    _, more = plan(tmp_path, "more", NOISY="0", DISK_IMAGES="64", PIPELINE_PROBE="1", BUDGET_S="1000")
    assert not any("probe.py noisy" in c for c in more)
    assert any("--pipeline old" in c for c in more) and any("probe.py pipeline" in c for c in more)
    recorder = next(i for i, c in enumerate(more) if f"record.py {tmp_path}/more/recorded " in c)
    assert f"--artifacts {tmp_path}/more/gpu-node" in more[recorder + 1]


def _summary(folder: Path, *checks: Check) -> None:
    """A run's summary.json as gpuready writes it (RunResult.to_dict), from the given checks."""
    result = RunResult(command=folder.name)
    result.add(*checks)
    (folder / "run-1").mkdir(parents=True)
    (folder / "run-1" / "summary.json").write_text(json.dumps(result.to_dict()))


def test_noisy_verdict_holds_only_when_busy_runs_fail_and_later_pass(tmp_path: Path) -> None:
    from gpuready.workloads.controller import sweep
    from gpuready.workloads.launchers import Plan
    from gpuready.workloads.launchers.targets import Target

    out = tmp_path / "out"
    out.mkdir()
    (out / "noisy.json").write_text(json.dumps({"pid": 4242}))
    neighbour = {"pid": 4242, "name": "python3", "used_memory_mib": 20480}
    busy = {
        "rank": 0,
        "host": "h100",
        "gpu_index": 0,
        "device": "GPU NVIDIA H100 80GB HBM3",
        "precision": "bf16",
        "compiled": True,
        "batch_size": 256,
        "step_times": [256 / 1900.0] * 5,
        "gpu_other_processes": [neighbour],
    }
    plan = Plan(framework="pytorch", batch_size=256, image_size=224, mixed_precision=True)
    target = Target("local", "localhost", "NVIDIA H100 80GB HBM3", 1)
    _summary(out / "training-busy", sweep.gpu_check(1, [busy], plan, target))
    _summary(out / "gpu-node-busy", failed("perf.matmul_tflops", "localhost", "GPU 0: 410 TFLOP/s, below 700"))
    healthy = {**busy, "step_times": [256 / 3650.0] * 5, "gpu_other_processes": []}
    _summary(out / "training-b256", sweep.gpu_check(1, [healthy], plan, target))
    _summary(out / "gpu-node", passed("perf.matmul_tflops", "localhost", "GPU 0: 760 TFLOP/s"))
    verdict = probe.noisy_verdict(out)
    assert verdict["held"] is True and verdict["neighbour_pid"] == 4242
    assert verdict["busy"]["training-busy"]["named"] is True  # the smoke run names the neighbour's pid
    assert verdict["busy"]["gpu-node-busy"] == {
        "status": "failed",
        "named": False,
        "failed": ["perf.matmul_tflops: GPU 0: 410 TFLOP/s, below 700"],
    }
    assert verdict["idle"]["gpu-node"]["status"] == "passed"
    # an idle run that is not there (another batch's name) or failed, or a busy run that passed: the proof does not hold
    assert probe.noisy_verdict(out, idle=("gpu-node", "training-b64"))["held"] is False
    (out / "gpu-node" / "run-1" / "summary.json").unlink()
    (out / "gpu-node" / "run-1").rmdir()
    _summary(out / "gpu-node", failed("perf.matmul_tflops", "localhost", "GPU 0: 380 TFLOP/s, below 700"))
    assert probe.noisy_verdict(out)["held"] is False
    (out / "gpu-node" / "run-1" / "summary.json").unlink()
    (out / "gpu-node" / "run-1").rmdir()
    _summary(out / "gpu-node", passed("perf.matmul_tflops", "localhost", "GPU 0: 760 TFLOP/s"))
    assert probe.noisy_verdict(out)["held"] is True
    (out / "gpu-node-busy" / "run-1" / "summary.json").unlink()
    (out / "gpu-node-busy" / "run-1").rmdir()
    _summary(out / "gpu-node-busy", passed("perf.matmul_tflops", "localhost", "GPU 0: 700 TFLOP/s"))
    assert probe.noisy_verdict(out)["held"] is False
    missing = tmp_path / "none"
    missing.mkdir()
    assert probe.noisy_verdict(missing)["held"] is False


def test_gpu_probes_refuse_in_one_line_without_a_cuda_device() -> None:
    require(importlib.util.find_spec("torchvision"), "torch and torchvision not installed (make .venv/.stamp-torch)")
    done = _probe("baseline", "--steps", "1", timeout=300)
    assert done.returncode == 1 and json.loads(done.stdout) == {"passed": False, "reason": "torch sees no CUDA device"}
    neighbour = _probe("noisy", "--ready", "/nonexistent/ready", timeout=300)
    assert neighbour.returncode == 1 and json.loads(neighbour.stdout)["reason"] == "torch sees no CUDA device"
    bad = subprocess.run(
        [sys.executable, str(GPU / "probe.py"), "baseline", "--variants", "eager,turbo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2 and "--variants: unknown turbo" in bad.stderr
