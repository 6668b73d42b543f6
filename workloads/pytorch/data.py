"""PyTorch input pipelines for the converter's ChestX-ray14 TFRecords: the "new" and "old" approaches.

The new one follows the same principles as the tf.data one (:mod:`gpuready.workloads.tensorflow.data`):
the file list is sharded first, by training process and then by DataLoader worker, so each reader
opens only its own files; PNGs are decoded and resized in parallel worker processes; batches are
prefetched (``prefetch_factor``) and pinned for the copy to the GPU. The old one reads and decodes
every record in the training process and shards afterwards, as the stalling tf.data pipeline did.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torchvision.transforms.v2 import functional as F

from gpuready.workloads.dataset import tfrecord
from gpuready.workloads.dataset.labels import PATHOLOGIES
from gpuready.workloads.dataset.reading import MEAN, STD, Reading, check_kind


def shard_files(data_dir: str, split: str) -> list[str]:
    files = sorted(str(p) for p in Path(data_dir).glob(f"{split}-*.tfrecord"))
    if not files:
        raise FileNotFoundError(f"no {split}-*.tfrecord files in {data_dir} (convert the data first)")
    return files


def decode(record: bytes, image_size: int, training: bool, rng: random.Random) -> tuple[Any, Any]:
    """One Example to (3 x size x size float image, 14 float labels), as the tf.data parser does."""
    example = tfrecord.parse_example(record)
    # Pillow decodes (torchvision.io's decoders are deprecated since 0.29); grey X-rays become 3 channels
    image = F.pil_to_tensor(Image.open(io.BytesIO(example["image"][0])).convert("RGB"))  # type: ignore[arg-type]
    image = F.resize(image, [image_size, image_size], antialias=True)
    if training and rng.random() < 0.5:
        image = F.horizontal_flip(image)
    image = F.normalize(image.float() / 255.0, MEAN, STD)
    labels = torch.tensor(example["labels"], dtype=torch.float32)
    return image, labels


class NewRecords(IterableDataset):
    """This process's shard of the files, split again between the DataLoader's worker processes."""

    def __init__(self, files: list[str], reading: Reading, shuffle_buffer: int) -> None:
        self.files = files[reading.rank :: reading.workers]  # first: each training process reads only its own files
        if not self.files:
            raise ValueError(
                f"{len(files)} files cannot be shared by {reading.workers} workers: convert with "
                "--shards of at least the worker count"
            )
        self.image_size, self.training, self.epochs = reading.image_size, reading.training, reading.epochs
        self.shuffle_buffer, self.seed = shuffle_buffer, (reading.seed or 0) + reading.rank

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        info = get_worker_info()
        worker, count = (info.id, info.num_workers) if info else (0, 1)
        # More loader workers than files: some read the same file, each keeping every count-th record.
        n = len(self.files)
        files, stride = (
            (self.files[worker::count], 1)
            if count <= n
            else ([self.files[worker % n]], len(range(worker % n, count, n)))
        )
        rng = random.Random(self.seed * 1000 + worker)
        epoch = 0
        while self.epochs is None or epoch < self.epochs:
            order = list(files)
            if self.training:
                rng.shuffle(order)
            buffer: list[bytes] = []
            for path in order:
                for i, record in enumerate(tfrecord.read_records(path)):
                    if stride > 1 and i % stride != worker // n:
                        continue
                    if not self.training:
                        yield decode(record, self.image_size, False, rng)
                        continue
                    buffer.append(record)
                    if len(buffer) >= self.shuffle_buffer:
                        yield decode(buffer.pop(rng.randrange(len(buffer))), self.image_size, True, rng)
            rng.shuffle(buffer)
            for record in buffer:
                yield decode(record, self.image_size, self.training, rng)
            epoch += 1


def _quiet_worker(_: int) -> None:
    torch.set_num_threads(1)  # parallelism comes from the worker processes; threads would only contend


def new(
    files: list[str], reading: Reading, *, shuffle_buffer: int = 256, loader_workers: int = 2, pin_memory: bool = False
) -> Any:
    """The DataLoader; ``loader_workers`` decode processes (0: in this process), ``pin_memory`` for a GPU."""
    dataset = NewRecords(files, reading, shuffle_buffer)
    extra: dict[str, Any] = (
        {"prefetch_factor": 2, "persistent_workers": True, "worker_init_fn": _quiet_worker} if loader_workers else {}
    )
    return DataLoader(
        dataset,
        batch_size=reading.batch_size,
        num_workers=loader_workers,
        pin_memory=pin_memory,
        drop_last=reading.training,
        **extra,
    )


def old(files: list[str], reading: Reading) -> Iterator[tuple[Any, Any]]:
    batch_size, image_size, rank, workers = reading.batch_size, reading.image_size, reading.rank, reading.workers
    training, epochs = reading.training, reading.epochs
    rng = random.Random((reading.seed or 0) + rank)
    epoch = 0
    while epochs is None or epoch < epochs:
        batch: list[tuple[Any, Any]] = []
        index = 0
        for path in files:
            for record in tfrecord.read_records(path):
                item = decode(record, image_size, training, rng)  # every record decoded by every process
                index += 1
                if (index - 1) % workers != rank:
                    continue
                batch.append(item)
                if len(batch) == batch_size:
                    yield torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch])
                    batch = []
        if batch and not training:
            yield torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch])
        epoch += 1


def build(kind: str, files: list[str], reading: Reading, **new_only: Any) -> Any:
    """The ``kind`` pipeline; ``new_only`` are :func:`new`'s own options, which the old pipeline has not."""
    check_kind(kind)
    return new(files, reading, **new_only) if kind == "new" else old(files, reading)


def synthetic(
    *, batch_size: int, image_size: int, rank: int = 0, device: Any = "cpu", channels_last: bool = False
) -> Iterator[tuple[Any, Any]]:
    """One random batch repeated forever (compute and communication only), seeded by rank like the TF one.

    Made once on ``device`` (in the layout the model wants), so a step copies nothing from the host.
    """
    gen = torch.Generator().manual_seed(1234 + rank)
    images = torch.randn(batch_size, 3, image_size, image_size, generator=gen).to(device)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = (torch.rand(batch_size, len(PATHOLOGIES), generator=gen) < 0.2).float().to(device)
    while True:
        yield images, labels


def png(image: torch.Tensor) -> bytes:
    """A 1- or 3-channel uint8 image tensor as PNG bytes, as the converter stores images."""
    array = image.permute(1, 2, 0).squeeze(-1).contiguous().numpy()
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def default_loader_workers(local_size: int, on_gpu: bool) -> int:
    """Decode processes per training process: on GPU all spare cores; on CPU half, the rest compute."""
    cores = max(1, (os.cpu_count() or 1) // max(1, local_size))
    return max(1, cores - 1) if on_gpu else max(1, cores // 2)
