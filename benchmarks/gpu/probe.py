"""The runbook's measurements that are not gpuready commands: a vector add on the GPU, the PyTorch
input pipeline's images/s per CPU core, the FLOPs of one training image, the model FLOP
utilisation (MFU) of the smoke training against the GPU's published dense bf16 peak, a plain
PyTorch training loop to compare gpuready's smoke run with, and the noisy neighbour: a process that
keeps the GPU busy with matrix products, and the verdict of the runs made beside it.

Usage:
  python benchmarks/gpu/probe.py vector-add                 # JSON on stdout; exit 1 if the sums differ
  python benchmarks/gpu/probe.py pipeline [--images 512] [--workers 1,N] [--side 256]
  python benchmarks/gpu/probe.py flops [--model densenet121] [--image-size 224]
  python benchmarks/gpu/probe.py figures SUMMARY_JSON FLOPS_JSON   # MFU from a training run
  python benchmarks/gpu/probe.py baseline [--batch-size 256] [--steps 50] [--warmup-steps 3] [--variants ...]
  python benchmarks/gpu/probe.py noisy --ready FILE [--seconds 600]   # until killed; JSON when it stops
  python benchmarks/gpu/probe.py noisy-verdict RUNBOOK_OUT   # exit 1 unless busy runs failed and later passed
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Dense (no sparsity) bf16 Tensor Core peaks in TFLOP/s, by the name nvidia-smi and torch give the GPU;
#: first match wins. NVIDIA's data sheets print the figures "with sparsity", twice these:
#: H100 SXM and H200 1,979; H100 NVL 1,671; H100 PCIe 1,513 (NVIDIA H100 and H200 Tensor Core GPU
#: data sheets, nvidia.com/en-us/data-center/h100/ and /h200/); A100 624 (NVIDIA A100 data sheet).
DENSE_BF16_TFLOPS = (
    ("H200 NVL", 835.5),
    ("H200", 989.5),
    ("H100 NVL", 835.5),
    ("H100 PCIe", 756.5),
    ("H100", 989.5),  # "NVIDIA H100 80GB HBM3": the SXM5 board
    ("A100", 312.0),
)


def peak_tflops(gpu_name: str) -> float | None:
    return next((peak for key, peak in DENSE_BF16_TFLOPS if key.lower() in gpu_name.lower()), None)


def mfu(images_per_second: float, flops_per_image: float, peak: float) -> float:
    """Achieved model FLOP/s over the peak: images/s x training FLOPs per image / (peak TFLOP/s x 1e12)."""
    return images_per_second * flops_per_image / (peak * 1e12)


def vector_add(elements: int = 1 << 26, repeats: int = 20) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"passed": False, "reason": "torch sees no CUDA device"}
    a = torch.rand(elements, device="cuda")
    b = torch.rand(elements, device="cuda")
    c = a + b
    torch.cuda.synchronize()
    passed = bool(torch.equal(c.cpu(), a.cpu() + b.cpu()))
    start = time.perf_counter()
    for _ in range(repeats):
        torch.add(a, b, out=c)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return {
        "passed": passed,
        "device": torch.cuda.get_device_name(),
        "elements": elements,
        "seconds_per_add": round(seconds, 6),
        "bandwidth_gb_s": round(3 * 4 * elements / seconds / 1e9, 1),  # read a and b, write c (float32)
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def make_shards(folder: Path, images: int, side: int = 512, shards: int = 8) -> list[str]:
    """NIH-like grey PNGs (smooth noise compresses like an X-ray) in TFRecords, as the converter writes them."""
    import torch

    from gpuready.workloads.dataset import tfrecord
    from gpuready.workloads.pytorch.data import png

    gen = torch.Generator().manual_seed(7)
    records: list[list[bytes]] = [[] for _ in range(shards)]
    for i in range(images):
        small = torch.rand(1, 1, side // 16, side // 16, generator=gen) * 255
        image = torch.nn.functional.interpolate(small, size=(side, side), mode="bilinear")[0].to(torch.uint8)
        example = tfrecord.encode_example(
            {"image": [png(image)], "labels": [i % 2] * 14, "name": [f"{i:08d}_000.png".encode()]}
        )
        records[i % shards].append(example)
    paths = []
    for i, shard in enumerate(records):
        path = folder / f"train-{i:05d}-of-{shards:05d}.tfrecord"
        tfrecord.write_records(path, shard)
        paths.append(str(path))
    return paths


def pipeline_rate(files: list[str], loader_workers: int, batches: int, batch_size: int = 32) -> float:
    from gpuready.workloads.dataset.reading import Reading
    from gpuready.workloads.pytorch import data as torch_data

    loader = torch_data.new(files, Reading(batch_size, 224), loader_workers=loader_workers)
    it = iter(loader)
    for _ in range(max(2, loader_workers)):  # warm-up: worker start, first files opened
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    rate = batch_size * batches / (time.perf_counter() - start)
    del it, loader
    return rate


def pipeline(images: int, workers: list[int], batches: int, side: int = 256) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        files = make_shards(Path(tmp), images, side)
        rates = {n: pipeline_rate(files, n, batches) for n in workers}
    return {
        "images": images,
        "side": side,
        "image_size": 224,
        "cpu_count": os.cpu_count(),
        "images_per_second": {str(n): round(r, 1) for n, r in rates.items()},
        "images_per_second_per_core": {str(n): round(r / n, 1) for n, r in rates.items()},
    }


def shards(folder: Path, images: int, side: int, count: int) -> dict[str, Any]:
    """Training data on disk for the real-data runs: what ``--data`` reads, as the converter writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    files = make_shards(folder, images, side, count)
    return {
        "folder": str(folder),
        "images": images,
        "side": side,
        "shards": len(files),
        "bytes": sum(Path(f).stat().st_size for f in files),
    }


def flops(model: str, image_size: int) -> dict[str, Any]:
    from gpuready.workloads.pytorch.train import training_flops_per_image

    value = training_flops_per_image(model, image_size)
    return {
        "model": model,
        "image_size": image_size,
        "training_flops_per_image": value,
        "gflops": round(value / 1e9, 2),
        "counted_by": "torch.utils.flop_counter.FlopCounterMode (fwd + bwd)",
    }


def figures(summary: dict[str, Any], flop_count: dict[str, Any]) -> dict[str, Any]:
    checks = {c["id"]: c["status"] for c in summary.get("checks", [])}
    if "training" not in summary.get("metrics", {}):
        return {"passed": False, "reason": "no training figures: no size trained", "checks": checks}
    training = summary["metrics"]["training"]
    row = training["sizes"][0]
    gpu = str(training.get("gpu_model") or "")
    raw_device = summary.get("device") or gpu
    peak = peak_tflops(gpu) or peak_tflops(raw_device)
    result = {
        "gpu": gpu,
        "workers": row["workers"],
        "batch_size": training.get("batch_size"),
        "images_per_second": row["images_per_second"],
        "step_time_median_s": row.get("step_time_median_s"),
        "training_gflops_per_image": flop_count["gflops"],
        "data": training.get("data"),
        "pipeline": training.get("pipeline"),
        "precision": training.get("precision") or ("bf16" if training.get("mixed_precision") else "fp32"),
        "compiled": training.get("compiled", False),
        "compile_s": row.get("compile_s"),
        "peak_dense_bf16_tflops": peak,
        "checks": checks,
    }
    if peak:
        result["mfu"] = round(
            mfu(row["images_per_second"] / row["workers"], flop_count["training_flops_per_image"], peak), 4
        )
    return result


#: the plain loop's variants, as the issue that asked for the GPU-bound smoke run measured them
BASELINE_VARIANTS = ("eager", "fused", "compiled")


def baseline(batch_size: int, steps: int, warmup_steps: int, image_size: int, variants: list[str]) -> dict[str, Any]:
    """A plain PyTorch training loop, written as a user would and sharing no code with gpuready's smoke run:
    torchvision's DenseNet-121 (14 outputs), bf16 autocast, channels_last, one synthetic batch on the GPU,
    BCE-with-logits, Adam. Variants: eager with Adam's default, eager with Adam(fused=True), and
    torch.compile (default mode) with Adam(fused=True). images/s from the timed steps; the first step's
    excess over a timed step is its compile time."""
    import torch

    try:
        from torchvision.models import densenet121
    except ImportError:  # torch without torchvision: the same layers from gpuready (docs/gpu-runbook.md)
        from gpuready.workloads.pytorch.model import densenet121 as _ours

        def densenet121(num_classes: int, weights: None = None) -> Any:
            return _ours(num_classes)

    if not torch.cuda.is_available():
        return {"passed": False, "reason": "torch sees no CUDA device"}
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    images = torch.randn(batch_size, 3, image_size, image_size, device=device).contiguous(
        memory_format=torch.channels_last
    )
    labels = (torch.rand(batch_size, 14, device=device) < 0.2).float()
    results: dict[str, Any] = {}
    for variant in variants:
        torch.manual_seed(0)
        model = densenet121(num_classes=14, weights=None).to(device).to(memory_format=torch.channels_last)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=variant != "eager")
        forward = torch.compile(model) if variant == "compiled" else model
        loss_fn = torch.nn.BCEWithLogitsLoss()
        times = []
        for _ in range(max(1, warmup_steps) + steps):
            start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = forward(images)
            loss = loss_fn(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss.item()
            times.append(time.perf_counter() - start)
        timed = times[max(1, warmup_steps) :]
        results[variant] = {
            "images_per_second": round(batch_size * len(timed) / sum(timed), 1),
            "step_time_median_s": round(statistics.median(timed), 6),
            "first_step_s": round(times[0], 3),
            "compile_s": round(max(0.0, times[0] - statistics.median(timed)), 3),
        }
        del model, optimizer, forward
        torch.cuda.empty_cache()
    best = max(results, key=lambda v: results[v]["images_per_second"])
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "model": "densenet121 (torchvision)",
        "batch_size": batch_size,
        "image_size": image_size,
        "steps": steps,
        "warmup_steps": max(1, warmup_steps),
        "precision": "bf16 autocast, channels_last",
        "variants": results,
        "best": best,
    }


def noisy(ready: Path, seconds: float, side: int = 8192) -> dict[str, Any]:
    """The noisy neighbour: bf16 matrix products on GPU 0 until SIGTERM (or ``seconds``), so whatever else
    runs there shares the GPU. Writes ``ready`` (its pid and rate) once it is multiplying."""
    import torch

    if not torch.cuda.is_available():
        return {"passed": False, "reason": "torch sees no CUDA device"}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    a = torch.randn(side, side, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(side, side, device="cuda", dtype=torch.bfloat16)
    start = time.perf_counter()
    products = 0
    while not stop and time.perf_counter() - start < seconds:
        for _ in range(10):
            torch.mm(a, b)
        torch.cuda.synchronize()
        products += 10
        if products == 20:
            rate = 2 * side**3 * products / (time.perf_counter() - start) / 1e12
            ready.write_text(f"pid {os.getpid()} multiplying {side}x{side} bf16 matrices at {rate:.0f} TFLOP/s\n")
    elapsed = time.perf_counter() - start
    return {
        "pid": os.getpid(),
        "device": torch.cuda.get_device_name(),
        "side": side,
        "seconds": round(elapsed, 1),
        "products": products,
        "tflops": round(2 * side**3 * products / elapsed / 1e12, 1),
    }


#: The noisy-neighbour proof: the runs the runbook makes beside the neighbour, and the idle ones (before it).
BUSY_RUNS = ("gpu-node-busy", "training-busy")
IDLE_RUNS = ("gpu-node", "training-b256")


def _run_verdict(folder: Path, neighbour_pid: int | None) -> dict[str, Any]:
    summaries = sorted(folder.glob("*/summary.json"))
    if not summaries:
        return {"status": "missing", "named": False, "failed": []}
    summary = json.loads(summaries[0].read_text())
    failed = [c for c in summary.get("checks", []) if c.get("status") in ("failed", "error")]
    named = neighbour_pid is not None and any(f"pid {neighbour_pid}" in str(c.get("message", "")) for c in failed)
    return {
        "status": summary.get("status", "?"),
        "named": named,
        "failed": [f"{c['id']}: {c.get('message', '')}" for c in failed],
    }


def noisy_verdict(out: Path, idle: tuple[str, ...] = IDLE_RUNS) -> dict[str, Any]:
    """Did the noisy-neighbour proof hold? Beside the neighbour neither gpu-node nor the smoke run may pass
    (each fails against its reference or names the neighbour's pid); on the idle GPU (the runs ``idle``), both
    passed."""
    pid = None
    try:
        pid = int(json.loads((out / "noisy.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        ready = (out / "noisy.ready").read_text().split() if (out / "noisy.ready").exists() else []
        pid = int(ready[1]) if len(ready) > 1 and ready[1].isdigit() else None
    verdict: dict[str, Any] = {"neighbour_pid": pid}
    for phase, runs in (("busy", BUSY_RUNS), ("idle", idle)):
        verdict[phase] = {name: _run_verdict(out / name, pid) for name in runs}
    busy_failed = all(v["status"] in ("failed", "error") for v in verdict["busy"].values())
    idle_passed = all(v["status"] == "passed" for v in verdict["idle"].values())
    verdict["held"] = busy_failed and idle_passed
    verdict["passed"] = verdict["held"]
    return verdict


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("vector-add")
    p = sub.add_parser("pipeline")
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--workers", default="", help="loader worker counts (default: 1 and all cores)")
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--side", type=int, default=256, help="stored image side (the converter's default: 256)")
    d = sub.add_parser("shards")
    d.add_argument("folder", type=Path)
    d.add_argument("--images", type=int, default=2048)
    d.add_argument("--side", type=int, default=256, help="stored image side (the converter's default: 256)")
    d.add_argument("--shards", type=int, default=16)
    f = sub.add_parser("flops")
    f.add_argument("--model", default="densenet121")
    f.add_argument("--image-size", type=int, default=224)
    g = sub.add_parser("figures")
    g.add_argument("summary", type=Path)
    g.add_argument("flops", type=Path)
    b = sub.add_parser("baseline")
    b.add_argument("--batch-size", type=int, default=256)
    b.add_argument("--steps", type=int, default=50)
    b.add_argument("--warmup-steps", type=int, default=3)
    b.add_argument("--image-size", type=int, default=224)
    b.add_argument("--variants", default=",".join(BASELINE_VARIANTS), help="of " + ", ".join(BASELINE_VARIANTS))
    n = sub.add_parser("noisy")
    n.add_argument("--ready", type=Path, required=True)
    n.add_argument("--seconds", type=float, default=600)
    v = sub.add_parser("noisy-verdict")
    v.add_argument("out", type=Path)
    v.add_argument("--idle", default=",".join(IDLE_RUNS), help="the idle GPU's gpu-node and smoke-run folders")
    args = parser.parse_args(argv)
    if args.what == "vector-add":
        out = vector_add()
    elif args.what == "pipeline":
        workers = [int(w) for w in args.workers.split(",") if w] or sorted({1, os.cpu_count() or 1})
        out = pipeline(args.images, workers, args.batches, args.side)
    elif args.what == "shards":
        out = shards(args.folder, args.images, args.side, args.shards)
    elif args.what == "flops":
        out = flops(args.model, args.image_size)
    elif args.what == "baseline":
        variants = [v for v in args.variants.split(",") if v]
        unknown = sorted(set(variants) - set(BASELINE_VARIANTS))
        if unknown:
            parser.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(BASELINE_VARIANTS)}")
        out = baseline(args.batch_size, args.steps, args.warmup_steps, args.image_size, variants)
    elif args.what == "noisy":
        out = noisy(args.ready, args.seconds)
    elif args.what == "noisy-verdict":
        out = noisy_verdict(args.out, tuple(n for n in args.idle.split(",") if n))
    else:
        out = figures(json.loads(args.summary.read_text()), json.loads(args.flops.read_text()))
    print(json.dumps(out, indent=1))
    return 1 if out.get("passed") is False else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
