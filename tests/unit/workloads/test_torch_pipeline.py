"""The PyTorch input pipeline shards files first, decodes in worker processes, and sees every record once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpuready.workloads.dataset import tfrecord
from gpuready.workloads.dataset.reading import MEAN, STD, Reading
from tests.conftest import import_torch_stack

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is None,
    reason="torch and torchvision not installed (make .venv/.stamp-torch)",
)


@pytest.fixture(autouse=True)
def _torch_beside_ansible() -> None:
    import_torch_stack()


def _shards(folder: Path, count: int, per_shard: int) -> list[str]:
    import torch

    from gpuready.workloads.pytorch.data import png

    paths = []
    for s in range(count):
        records = []
        for i in range(per_shard):
            image = torch.full((1, 40, 40), s * per_shard + i, dtype=torch.uint8)  # the pixel value names the record
            records.append(tfrecord.encode_example({"image": [png(image)], "labels": [i % 2] * 14, "name": [b"x"]}))
        path = folder / f"train-{s:05d}-of-{count:05d}.tfrecord"
        tfrecord.write_records(path, records)
        paths.append(str(path))
    return paths


def _seen(loader, batches: int | None = None) -> list[int]:
    ids = []
    for n, (images, labels) in enumerate(loader):
        if batches is not None and n >= batches:
            break
        assert images.shape[1:] == (3, 32, 32) and labels.shape[1:] == (14,)
        # undo the normalisation of the red channel to read back the record's pixel value
        ids += [round(float(v)) for v in (images[:, 0, 0, 0] * STD[0] + MEAN[0]) * 255]
    return ids


@pytest.mark.parametrize("loader_workers", [0, 2, 3])
def test_each_rank_reads_only_its_files_and_every_record_once(tmp_path: Path, loader_workers: int) -> None:
    from gpuready.workloads.pytorch import data as torch_data

    files = _shards(tmp_path, 4, 5)
    per_rank = []
    for rank in range(2):
        loader = torch_data.new(
            files, Reading(1, 32, rank=rank, workers=2, training=False, epochs=1), loader_workers=loader_workers
        )
        assert loader.dataset.files == files[rank::2]  # sharded by file before anything is read
        per_rank.append(sorted(_seen(loader)))
    assert per_rank[0] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    assert per_rank[1] == [5, 6, 7, 8, 9, 15, 16, 17, 18, 19]


def test_old_pipeline_decodes_everything_then_keeps_its_share(tmp_path: Path) -> None:
    from gpuready.workloads.pytorch import data as torch_data

    files = _shards(tmp_path, 2, 4)
    ids = _seen(torch_data.build("old", files, Reading(2, 32, rank=1, workers=2, training=False, epochs=1)))
    assert ids == [1, 3, 5, 7]


def test_too_few_files_for_the_workers_is_a_clear_error(tmp_path: Path) -> None:
    from gpuready.workloads.pytorch import data as torch_data

    with pytest.raises(ValueError, match="1 files cannot be shared by 2 workers"):
        torch_data.new(_shards(tmp_path, 1, 2), Reading(1, 32, rank=1, workers=2))


@pytest.mark.slow
def test_densenet_without_torchvision_matches_torchvision_and_costs_about_17_gflop() -> None:
    import torchvision

    from gpuready.workloads.pytorch.model import densenet121
    from gpuready.workloads.pytorch.train import training_flops_per_image

    def params(model) -> int:
        return sum(p.numel() for p in model.parameters())

    assert params(densenet121(14)) == params(torchvision.models.densenet121(weights=None, num_classes=14))
    gflop = training_flops_per_image("densenet121", 224) / 1e9
    assert 16 < gflop < 18, gflop  # 2.87 GMAC forward (torchvision's model table) x 2 FLOP x 3 (fwd + bwd)


def test_synthetic_batch_is_made_once_where_the_model_is_and_steps_copy_nothing() -> None:
    import torch

    from gpuready.workloads.pytorch import data as torch_data
    from gpuready.workloads.pytorch.train import on_device

    batches = torch_data.synthetic(batch_size=2, image_size=32, rank=1, device="cpu", channels_last=True)
    images, labels = next(batches)
    assert images.is_contiguous(memory_format=torch.channels_last) and labels.shape == (2, 14)
    again, _ = next(batches)
    assert again is images  # the same tensor every step: nothing is made or copied per step
    moved, moved_labels = on_device(images, labels, torch.device("cpu"), True)
    assert moved.data_ptr() == images.data_ptr() and moved_labels.data_ptr() == labels.data_ptr()
    # the same values as the host-side batch of the same rank: placing it changes nowhere else
    plain, _ = next(torch_data.synthetic(batch_size=2, image_size=32, rank=1))
    assert torch.equal(plain, images) and not plain.is_contiguous(memory_format=torch.channels_last)
