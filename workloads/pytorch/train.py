"""The PyTorch training entry point, one process per GPU under torchrun:
``torchrun --nproc-per-node N -m gpuready.workloads.pytorch.train [options]``.

CheXNet as torchvision's DenseNet-121 (or ResNet-50) with a 14-label head, DistributedDataParallel
(NCCL on GPUs, Gloo on CPUs) when there is more than one worker, optional bf16 autocast. On a GPU the
step is made GPU-bound: the model is compiled (``torch.compile``, its artefacts cached under the
user's cache folder, so the next run on the node compiles from the cache), Adam runs fused, the
model and input are channels_last, and synthetic data stays on the device. Like
:mod:`gpuready.workloads.tensorflow.train`, every process times each step (fetching its batch included) and
prints one ``GPUREADY_RESULT {json}`` line, so the launchers, the sweep, the report and
``report compare`` treat both frameworks alike.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
from typing import Any

from gpuready.workloads import gpu_sharing
from gpuready.workloads.dataset.reading import Reading
from gpuready.workloads.worker import auroc, common_arguments, compiles, emit, evaluation, no_gpu, timed_steps


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = common_arguments("torchrun ... -m gpuready.workloads.pytorch.train", __doc__)
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
    install the build matching its torch), DenseNet-121 from :mod:`gpuready.workloads.pytorch.model`.
    """
    try:
        import torchvision
    except ImportError:
        if name != "densenet121":
            raise
        from gpuready.workloads.pytorch.model import densenet121

        return densenet121(classes)
    builders = {"densenet121": torchvision.models.densenet121, "resnet50": torchvision.models.resnet50}
    return builders[name](weights=None, num_classes=classes)


def model_source() -> str:
    import importlib.util

    return "torchvision" if importlib.util.find_spec("torchvision") else "gpuready.workloads.pytorch.model"


def weights_digest(model: Any) -> str:
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def training_flops_per_image(name: str, image_size: int) -> float:
    """FLOPs of one image's forward and backward pass, counted by torch's FlopCounterMode on the CPU."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from gpuready.workloads.dataset.labels import PATHOLOGIES

    model = build_model(name, len(PATHOLOGIES))
    counter = FlopCounterMode(display=False)
    with counter:
        model(torch.randn(1, 3, image_size, image_size)).sum().backward()
    return float(counter.get_total_flops())


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def cache_dir() -> str:
    """Where torch.compile keeps its artefacts (Inductor's FX graph and AOTAutograd caches, Triton kernels):
    under the user's cache folder, which outlives /tmp (torch's default), so a second run on the node
    reuses them. An explicit TORCHINDUCTOR_CACHE_DIR wins."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(base, "gpuready", "torchinductor")


def use_cache_dir() -> str:
    """Set before torch compiles anything: Inductor reads its cache folder from the environment, and keeps
    Triton's kernels under it too (``triton/<device>``) unless TRITON_CACHE_DIR says otherwise."""
    folder = cache_dir()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    return folder


def compile_model(model: Any, enabled: bool) -> Any:
    """torch.compile in its default mode: the autotuning modes (max-autotune) multiply the first run's compile
    time, and the smoke run must fit minutes. Compiled lazily: the first step pays for it."""
    if not enabled:
        return model
    import torch

    return torch.compile(model)


def make_optimizer(params: Any, lr: float, on_gpu: bool) -> tuple[Any, str]:
    """Adam; fused (one kernel for all parameters, not a few per tensor) on GPUs, where torch has it."""
    import torch

    if on_gpu:
        return torch.optim.Adam(params, lr=lr, fused=True), "Adam (fused)"
    return torch.optim.Adam(params, lr=lr), "Adam"


def on_device(images: Any, labels: Any, device: Any, channels_last: bool) -> tuple[Any, Any]:
    """The batch where the model is; a no-op for synthetic data, which already lives there."""
    import torch

    images = images.to(device, non_blocking=True)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    return images, labels.to(device, non_blocking=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from gpuready.workloads.dataset.labels import PATHOLOGIES
    from gpuready.workloads.pytorch import data as torch_data

    rank, size = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    local_rank, local_size = _env_int("LOCAL_RANK", 0), _env_int("LOCAL_WORLD_SIZE", 1)
    # before any CUDA call of this process: whatever is on a GPU now is another process's
    gpus_before = gpu_sharing.before_context() if not args.cpu else {}
    on_gpu = torch.cuda.is_available() and not args.cpu
    if not on_gpu and not args.cpu:
        no_gpu("pytorch", f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}, no CUDA device")
    gpu_index: int | None = None
    if on_gpu:
        # one process per GPU: the local rank's GPU only
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
        device_name = f"GPU {torch.cuda.get_device_name(device)}"
        gpu_index = device.index
        torch.backends.cudnn.benchmark = True
    else:
        # on CPU the workers of a host share its cores; torchrun's default of 1 thread would hide the machine
        threads = args.threads or max(1, (os.cpu_count() or 1) // local_size)
        torch.set_num_threads(threads)
        device, device_name = torch.device("cpu"), f"CPU ({threads} threads)"
    backend = "nccl" if on_gpu else "gloo"
    # one worker has nothing to average: no process group, no DDP buckets to copy through every step
    distributed = "MASTER_ADDR" in os.environ and size > 1
    if distributed:
        dist.init_process_group(backend)

    model = build_model(args.model, len(PATHOLOGIES)).to(device)
    if on_gpu:
        model = model.to(memory_format=torch.channels_last)
    trained = DistributedDataParallel(model, device_ids=[device.index] if on_gpu else None) if distributed else model
    compiled = compiles(args.compile, on_gpu)
    trained = compile_model(trained, compiled)
    # Linear scaling rule, as in the TensorFlow path: the global batch grows with the workers.
    optimizer, optimizer_name = make_optimizer(model.parameters(), args.learning_rate * size, on_gpu)
    # logits + BCEWithLogits: the numerically safe form of the TF model's sigmoid + binary cross-entropy
    loss_fn = torch.nn.BCEWithLogitsLoss()

    if args.data == "synthetic":
        batches = torch_data.synthetic(
            batch_size=args.batch_size, image_size=args.image_size, rank=rank, device=device, channels_last=on_gpu
        )
    else:
        loader_workers = (
            args.loader_workers if args.loader_workers >= 0 else torch_data.default_loader_workers(local_size, on_gpu)
        )
        batches = iter(
            torch_data.build(
                args.pipeline,
                torch_data.shard_files(args.data, "train"),
                Reading(args.batch_size, args.image_size, rank=rank, workers=size),
                loader_workers=loader_workers,
                pin_memory=on_gpu,
            )
        )
    before = weights_digest(model)

    def step() -> float:
        images, labels = on_device(*next(batches), device, on_gpu)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.mixed_precision):
            logits = trained(images)
        loss = loss_fn(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.item())  # waits for the step to finish: the time is the real one

    # the first step compiles (and autotunes cuDNN): never timed, whatever --warmup-steps says
    timing = timed_steps(args, rank, size, step)
    sharing = (
        gpu_sharing.others(gpus_before, gpu_sharing.compute_apps(), gpu_uuid(device), gpu_sharing.own_pids())
        if on_gpu
        else {"processes": []}
    )

    result: dict[str, Any] = {
        "rank": rank,
        "size": size,
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "device": device_name,
        "gpu_index": gpu_index,
        "gpu_other_processes": sharing["processes"],
        "gpu_load_before": sharing.get("load_before", {}),
        "own_pids": sharing.get("own_pids", ""),
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
        "compile": args.compile,
        "compiled": compiled,
        "compile_cache": cache_dir() if compiled else "",
        "optimizer": optimizer_name,
        "weights_sha256_before": before,
        "weights_sha256": weights_digest(model),
        **timing.record(),
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

    from gpuready.workloads.pytorch import data as torch_data

    model.eval()
    loader = torch_data.new(torch_data.shard_files(args.data, "test"), evaluation(args), loader_workers=0)
    labels, scores = [], []
    with torch.no_grad():
        for i, (images, y) in enumerate(loader):
            if i >= args.eval_batches:
                break
            labels.append(y.numpy())
            scores.append(torch.sigmoid(model(images.to(device)).float()).cpu().numpy())
    return auroc(np.concatenate(labels), np.concatenate(scores))


def gpu_uuid(device: Any) -> str:
    import torch

    return str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    use_cache_dir()
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
