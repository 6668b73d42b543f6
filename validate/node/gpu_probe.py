"""gpuready's own GPU probe: what a node can do, measured through torch (which ships cuBLAS and NCCL).

Sent to a node as a file and run there with the node's python3 when nvbandwidth or nccl-tests are
missing; it imports nothing of gpuready. It prints one JSON object: per GPU the samples of dense
matrix-product TFLOP/s, device memory bandwidth (a copy: bytes read plus bytes written), and pinned
host-to-device and device-to-host copy bandwidth; per peer-capable GPU pair the copy bandwidth; and the
NCCL all-reduce bus bandwidth across the GPUs (nccl-tests' definition: algbw * 2(n-1)/n). Every figure
is measured ``--samples`` times; the checks judge the median.

``--device cpu`` runs the same code on the CPU (float32, gloo instead of NCCL, ``--cpu-devices`` stand-in
devices): the tests run it end to end on machines without a GPU. Its figures are the CPU's, never a GPU's.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

METRICS = ("matmul", "memory", "h2d", "d2h", "p2p", "nccl")


def _sync(torch: Any, devices: str | tuple[str, ...]) -> None:
    for device in (devices,) if isinstance(devices, str) else devices:
        if device != "cpu":
            torch.cuda.synchronize(device)


def _timed(torch: Any, device: str | tuple[str, ...], step: Callable[[], object], repeat: int) -> float:
    """Seconds per call of ``step`` (after one warm-up call)."""
    step()
    _sync(torch, device)
    start = time.perf_counter()
    for _ in range(repeat):
        step()
    _sync(torch, device)
    return (time.perf_counter() - start) / repeat


def matmul_tflops(torch: Any, device: str, cpu: bool) -> float:
    # bf16 on Tensor Cores (Ampere and later); Volta has fp16 Tensor Cores and no bf16.
    if cpu:
        n, dtype = 512, torch.float32
    else:
        n = 8192
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = _timed(torch, device, lambda: torch.matmul(a, b), 10)
    return 2 * n**3 / seconds / 1e12


def memory_bandwidth(torch: Any, device: str, cpu: bool) -> float:
    size = (64 if cpu else 1024) * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = _timed(torch, device, lambda: dst.copy_(src), 10)
    return 2 * size / seconds / 1e9


def host_copy(torch: Any, device: str, cpu: bool, to_device: bool) -> float:
    size = (64 if cpu else 256) * 2**20
    host = torch.empty(size, dtype=torch.uint8, pin_memory=not cpu)
    on_device = torch.empty(size, dtype=torch.uint8, device=device)
    if to_device:
        seconds = _timed(torch, device, lambda: on_device.copy_(host, non_blocking=True), 5)
    else:
        seconds = _timed(torch, device, lambda: host.copy_(on_device, non_blocking=True), 5)
    return size / seconds / 1e9


def peer_copy(torch: Any, a: str, b: str, cpu: bool) -> float:
    size = (64 if cpu else 256) * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=a)
    dst = torch.empty(size, dtype=torch.uint8, device=b)
    # A copy between devices is ordered on both devices' streams: wait for both.
    seconds = _timed(torch, (a, b), lambda: dst.copy_(src, non_blocking=True), 5)
    return size / seconds / 1e9


def allreduce_bytes(total_memory: int) -> int:
    """The all-reduce message size: the size the bound it is judged against was measured at (Azure's health
    checks: 16 GiB on 80 GB and larger GPUs, 8 GiB on 32/40 GB ones; gpuready's NCCL_COMMAND sends the same),
    2 GiB on smaller GPUs."""
    gib, mib = 2**30, 2**20
    if total_memory >= 64000 * mib:  # the thresholds NCCL_COMMAND reads from nvidia-smi's memory.total (MiB)
        return 16 * gib
    return 8 * gib if total_memory >= 32000 * mib else 2 * gib


def _allreduce_worker(rank: int, world: int, store: str, cpu: bool, samples: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    device = "cpu" if cpu else f"cuda:{rank}"
    if not cpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("gloo" if cpu else "nccl", init_method=f"file://{store}", rank=rank, world_size=world)
    size = 16 * 2**20 if cpu else allreduce_bytes(torch.cuda.get_device_properties(rank).total_memory)
    tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
    figures = []
    for _ in range(samples):
        seconds = _timed(torch, device, lambda: dist.all_reduce(tensor), 5)
        algbw = size / seconds / 1e9
        figures.append(algbw * 2 * (world - 1) / world)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(figures, f)
    dist.destroy_process_group()


def nccl_busbw(count: int, cpu: bool, samples: int) -> list[float]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        store, out = os.path.join(folder, "store"), os.path.join(folder, "out.json")
        mp.spawn(_allreduce_worker, args=(count, store, cpu, samples, out), nprocs=count, join=True)
        with open(out) as f:
            figures: list[float] = json.load(f)
            return figures


def _samples(measure: Callable[[], float], samples: int) -> list[float]:
    return [round(measure(), 3) for _ in range(samples)]


def _measure_gpu(torch: Any, gpu: dict[str, Any], device: str, metrics: set[str], samples: int, cpu: bool) -> None:
    if "matmul" in metrics:
        gpu["matmul_tflops"] = _samples(lambda: matmul_tflops(torch, device, cpu), samples)
    if "memory" in metrics:
        gpu["memory_bandwidth"] = _samples(lambda: memory_bandwidth(torch, device, cpu), samples)
    if "h2d" in metrics:
        gpu["h2d_bandwidth"] = _samples(lambda: host_copy(torch, device, cpu, True), samples)
    if "d2h" in metrics:
        gpu["d2h_bandwidth"] = _samples(lambda: host_copy(torch, device, cpu, False), samples)


def _one_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def run(metrics: set[str], samples: int, cpu: bool, cpu_devices: int) -> dict[str, Any]:
    import torch

    result: dict[str, Any] = {"probe": "gpuready", "torch": torch.__version__, "device": "cpu" if cpu else "cuda"}
    if cpu:
        devices = ["cpu"] * cpu_devices
        names = [f"cpu stand-in {i}" for i in range(cpu_devices)]
    else:
        if not torch.cuda.is_available():
            result["no_cuda"] = "torch sees no CUDA device (torch.cuda.is_available() is False)"
            return result
        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        names = [torch.cuda.get_device_name(i) for i in range(len(devices))]
    result["dtype"] = "float32" if cpu else ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    gpus = []
    for index, device in enumerate(devices):
        gpu: dict[str, Any] = {"index": index, "name": names[index]}
        try:
            _measure_gpu(torch, gpu, device, metrics, samples, cpu)
        except Exception as e:  # a GPU that cannot compute is named; the checks fail with this one line
            result["error"] = f"GPU {index}: {_one_line(e)}"
            return result
        gpus.append(gpu)
    result["gpus"] = gpus
    if "p2p" in metrics and len(devices) > 1:
        pairs = []
        for a in range(len(devices)):
            for b in range(a + 1, len(devices)):
                if cpu or torch.cuda.can_device_access_peer(a, b):
                    figures = _samples(functools.partial(peer_copy, torch, devices[a], devices[b], cpu), samples)
                    pairs.append({"pair": [a, b], "p2p_bandwidth": figures})
        result["p2p"] = pairs
    if "nccl" in metrics and len(devices) > 1:
        try:
            result["nccl_allreduce_busbw"] = nccl_busbw(len(devices), cpu, samples)
        except Exception as e:  # the per-GPU figures above still count; the check says why NCCL did not run
            result["nccl_error"] = _one_line(e)
    return result


def main(argv: list[str] | None = None) -> int:
    # CUDA numbers devices fastest first unless told otherwise; nvidia-smi numbers them by PCI bus id, and the
    # checks name GPUs as nvidia-smi does (CUDA_DEVICE_ORDER, CUDA C programming guide's environment variables).
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated: " + ", ".join(METRICS))
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--cpu-devices", type=int, default=2, help="stand-in devices with --device cpu")
    args = parser.parse_args(argv)
    metrics = {m.strip() for m in args.metrics.split(",") if m.strip()}
    if unknown := metrics - set(METRICS):
        print(f"gpu_probe: unknown metric(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(json.dumps({"probe": "gpuready", "error": f"torch cannot be imported: {e}"}))
        return 3
    print(json.dumps(run(metrics, max(1, args.samples), args.device == "cpu", max(1, args.cpu_devices))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
