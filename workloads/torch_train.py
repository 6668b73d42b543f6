"""The PyTorch training entry point, one process per GPU under torchrun:
``torchrun --nproc-per-node N -m gpuready.workloads.torch_train [options]``.

CheXNet as torchvision's DenseNet-121 (or ResNet-50) with a 14-label head, DistributedDataParallel
(NCCL on GPUs, Gloo on CPUs), optional bf16 autocast. Like :mod:`gpuready.workloads.train`, every
process times each step (fetching its batch included) and prints one ``GPUREADY_RESULT {json}``
line, so the launchers, the sweep, the report and ``report compare`` treat both frameworks alike.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import time
from typing import Any

from gpuready.workloads.train import PROCESS_START_UNIX, auroc, common_arguments, emit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = common_arguments("torchrun ... -m gpuready.workloads.torch_train", __doc__)
    p.add_argument("--mixed-precision", action="store_true", help="bf16 autocast (weights stay float32)")
    p.add_argument(
        "--loader-workers",
        type=int,
        default=-1,
        help="DataLoader processes per worker (-1: spare cores; real data only)",
    )
    return p.parse_args(argv)


def build_model(name: str, classes: int) -> Any:
    """Freshly initialised (no download: the smoke run measures the environment, not ImageNet).

    torchvision's models; where torchvision is missing (a GPU machine with only torch, and no way to
    install the build matching its torch), DenseNet-121 from :mod:`gpuready.workloads.torch_densenet`.
    """
    try:
        import torchvision
    except ImportError:
        if name != "densenet121":
            raise
        from gpuready.workloads.torch_densenet import densenet121

        return densenet121(classes)
    builders = {"densenet121": torchvision.models.densenet121, "resnet50": torchvision.models.resnet50}
    return builders[name](weights=None, num_classes=classes)


def model_source() -> str:
    import importlib.util

    return "torchvision" if importlib.util.find_spec("torchvision") else "gpuready.workloads.torch_densenet"


def weights_digest(model: Any) -> str:
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def training_flops_per_image(name: str, image_size: int) -> float:
    """FLOPs of one image's forward and backward pass, counted by torch's FlopCounterMode on the CPU."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from gpuready.workloads.chexnet import PATHOLOGIES

    model = build_model(name, len(PATHOLOGIES))
    counter = FlopCounterMode(display=False)
    with counter:
        model(torch.randn(1, 3, image_size, image_size)).sum().backward()
    return float(counter.get_total_flops())


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from gpuready.workloads import torch_data
    from gpuready.workloads.chexnet import PATHOLOGIES

    rank, size = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    local_rank, local_size = _env_int("LOCAL_RANK", 0), _env_int("LOCAL_WORLD_SIZE", 1)
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        # one process per GPU: the local rank's GPU only
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
        device_name = f"GPU {torch.cuda.get_device_name(device)}"
        torch.backends.cudnn.benchmark = True
    else:
        # on CPU the workers of a host share its cores; torchrun's default of 1 thread would hide the machine
        threads = args.threads or max(1, (os.cpu_count() or 1) // local_size)
        torch.set_num_threads(threads)
        device, device_name = torch.device("cpu"), f"CPU ({threads} threads)"
    backend = "nccl" if on_gpu else "gloo"
    distributed = "MASTER_ADDR" in os.environ
    if distributed:
        dist.init_process_group(backend)

    model = build_model(args.model, len(PATHOLOGIES)).to(device)
    if on_gpu:
        model = model.to(memory_format=torch.channels_last)
    trained = DistributedDataParallel(model, device_ids=[device.index] if on_gpu else None) if distributed else model
    # Linear scaling rule, as in the TensorFlow path: the global batch grows with the workers.
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate * size)
    # logits + BCEWithLogits: the numerically safe form of the TF model's sigmoid + binary cross-entropy
    loss_fn = torch.nn.BCEWithLogitsLoss()

    if args.data == "synthetic":
        batches = torch_data.synthetic(batch_size=args.batch_size, image_size=args.image_size, rank=rank)
    else:
        loader_workers = (
            args.loader_workers if args.loader_workers >= 0 else torch_data.default_loader_workers(local_size, on_gpu)
        )
        batches = iter(
            torch_data.build(
                args.pipeline,
                torch_data.shard_files(args.data, "train"),
                batch_size=args.batch_size,
                image_size=args.image_size,
                rank=rank,
                workers=size,
                loader_workers=loader_workers,
                pin_memory=on_gpu,
            )
        )
    before = weights_digest(model)
    losses, step_times = [], []
    first_step_unix = time.time()
    for i in range(args.warmup_steps + args.steps):
        start = time.perf_counter()
        images, labels = next(batches)
        images = images.to(device, non_blocking=True)
        if on_gpu:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.mixed_precision):
            logits = trained(images)
        loss = loss_fn(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        value = loss.item()  # waits for the step to finish: the time is the real one
        elapsed = time.perf_counter() - start
        losses.append(value)
        if i >= args.warmup_steps:
            step_times.append(elapsed)

    result: dict[str, Any] = {
        "rank": rank,
        "size": size,
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "device": device_name,
        "framework": "pytorch",
        "distribution": "ddp",
        "backend": backend,
        "torch": torch.__version__,
        "model": args.model,
        "model_source": model_source(),
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "data": args.data,
        "pipeline": args.pipeline,
        "mixed_precision": args.mixed_precision,
        "precision": "bf16" if args.mixed_precision else "fp32",
        "xla": False,
        "warmup_steps": args.warmup_steps,
        "process_start_unix": PROCESS_START_UNIX,
        "first_step_unix": first_step_unix,
        "step_times": step_times,
        "losses": losses,
        "weights_sha256_before": before,
        "weights_sha256": weights_digest(model),
    }
    if args.eval_batches and args.data != "synthetic" and rank == 0:
        result["auroc"] = evaluate(model, args, device)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    return result


def evaluate(model: Any, args: argparse.Namespace, device: Any) -> list[float | None]:
    import numpy as np
    import torch

    from gpuready.workloads import torch_data

    model.eval()
    loader = torch_data.new(
        torch_data.shard_files(args.data, "test"),
        batch_size=args.batch_size,
        image_size=args.image_size,
        training=False,
        epochs=1,
        loader_workers=0,
    )
    labels, scores = [], []
    with torch.no_grad():
        for i, (images, y) in enumerate(loader):
            if i >= args.eval_batches:
                break
            labels.append(y.numpy())
            scores.append(torch.sigmoid(model(images.to(device)).float()).cpu().numpy())
    return auroc(np.concatenate(labels), np.concatenate(scores))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
