"""The runbook's measurements that are not gpuready commands: a vector add on the GPU, the PyTorch
input pipeline's images/s per CPU core, the FLOPs of one training image, and the model FLOP
utilisation (MFU) of the smoke training against the GPU's published dense bf16 peak.

Usage:
  python benchmarks/gpu/probe.py vector-add                 # JSON on stdout; exit 1 if the sums differ
  python benchmarks/gpu/probe.py pipeline [--images 512] [--workers 1,N] [--side 256]
  python benchmarks/gpu/probe.py flops [--model densenet121] [--image-size 224]
  python benchmarks/gpu/probe.py figures SUMMARY_JSON FLOPS_JSON   # MFU from a training run
"""

from __future__ import annotations

import argparse
import json
import os
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

    from gpuready.workloads import tfrecord
    from gpuready.workloads.torch_data import png

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
    from gpuready.workloads import torch_data

    loader = torch_data.new(files, batch_size=batch_size, image_size=224, loader_workers=loader_workers)
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
    from gpuready.workloads.torch_train import training_flops_per_image

    value = training_flops_per_image(model, image_size)
    return {
        "model": model,
        "image_size": image_size,
        "training_flops_per_image": value,
        "gflops": round(value / 1e9, 2),
        "counted_by": "torch.utils.flop_counter.FlopCounterMode (fwd + bwd)",
    }


def figures(summary: dict[str, Any], flop_count: dict[str, Any]) -> dict[str, Any]:
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
        "precision": "bf16" if training.get("mixed_precision") else "fp32",
        "peak_dense_bf16_tflops": peak,
    }
    if peak:
        result["mfu"] = round(
            mfu(row["images_per_second"] / row["workers"], flop_count["training_flops_per_image"], peak), 4
        )
    return result


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
    else:
        out = figures(json.loads(args.summary.read_text()), json.loads(args.flops.read_text()))
    print(json.dumps(out, indent=1))
    return 1 if out.get("passed") is False else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
