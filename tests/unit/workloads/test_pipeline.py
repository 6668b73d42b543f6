"""ChestX-ray14 converter and tf.data pipelines on generated PNGs with known labels (real TensorFlow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpuready.workloads.dataset.labels import PATHOLOGIES
from tests.conftest import ModuleTmp, require

N_IMAGES = 24


def make_nih(root: Path, images: int = N_IMAGES) -> dict[str, tuple[int, ...]]:
    """An NIH-layout folder: PNGs (each filled with its own grey level) under images_001/images/, the CSV,
    and test_list.txt (every 4th image); returns the labels each image must get."""
    import tensorflow as tf

    (root / "images_001" / "images").mkdir(parents=True)
    rows, expected = ["Image Index,Finding Labels,Follow-up #,Patient ID"], {}
    for i in range(images):
        name = f"{i:08d}_000.png"
        found = [PATHOLOGIES[i % 14], PATHOLOGIES[(i * 5) % 14]] if i % 3 else ["No Finding"]
        rows.append(f"{name},{'|'.join(found)},0,{i}")
        expected[name] = tuple(int(p in found) for p in PATHOLOGIES)
        grey = tf.fill((40, 48, 1), tf.constant(10 * i % 256, tf.uint8))  # not square: the converter squares it
        (root / "images_001" / "images" / name).write_bytes(tf.io.encode_png(grey).numpy())
    (root / "Data_Entry_2017.csv").write_text("\n".join(rows) + "\n")
    (root / "test_list.txt").write_text("".join(f"{i:08d}_000.png\n" for i in range(0, images, 4)))
    return expected


@pytest.fixture(scope="module")
def nih(module_tmp: ModuleTmp) -> tuple[Path, dict[str, tuple[int, ...]]]:
    require(importlib.util.find_spec("tensorflow"), "TensorFlow (make test installs the train extra)")
    root = module_tmp("nih")
    return root, make_nih(root)


@pytest.fixture(scope="module")
def records(nih: tuple[Path, dict], module_tmp: ModuleTmp) -> Path:
    from gpuready.workloads.dataset import convert

    out = module_tmp("tfrecords")
    counts = convert.convert(nih[0], out, size=36, shards=4)
    assert counts == {"train": 18, "test": 6}
    return out


def _read_all(kind: str, records: Path, rank: int, workers: int) -> list[tuple[str, list[int], float, tuple]]:
    from gpuready.workloads.dataset.reading import Reading
    from gpuready.workloads.tensorflow import data as pipeline

    ds = pipeline.build(
        kind,
        pipeline.shard_files(str(records), "train"),
        Reading(3, 32, rank=rank, workers=workers, training=False, epochs=1),
        with_names=True,
    )
    seen = []
    for images, labels, names in ds:
        assert images.shape[1:] == (32, 32, 3) and labels.shape[1:] == (14,)
        for image, label, name in zip(images.numpy(), labels.numpy(), names.numpy(), strict=True):
            grey = (image[..., 0] * 0.229 + 0.485) * 255  # undo the normalisation of the red channel
            seen.append((name.decode(), [int(x) for x in label], float(grey.mean()), image.shape))
    return seen


@pytest.mark.train
@pytest.mark.parametrize("kind", ["new", "old"])
def test_batches_carry_the_right_labels_and_pixels(kind: str, nih: tuple[Path, dict], records: Path) -> None:
    expected = nih[1]
    seen = _read_all(kind, records, 0, 1)
    assert sorted(n for n, *_ in seen) == sorted(n for i, n in enumerate(sorted(expected)) if i % 4)
    for name, labels, grey, _ in seen:
        assert tuple(labels) == expected[name], name
        assert grey == pytest.approx(10 * int(name[:8]), abs=0.5), name


@pytest.mark.train
@pytest.mark.parametrize("kind", ["new", "old"])
def test_sharding_gives_each_worker_a_disjoint_part(kind: str, records: Path) -> None:
    everything = {n for n, *_ in _read_all(kind, records, 0, 1)}
    parts = [{n for n, *_ in _read_all(kind, records, rank, 2)} for rank in (0, 1)]
    assert parts[0] and parts[1]
    assert not parts[0] & parts[1]
    assert parts[0] | parts[1] == everything


def test_patient_wise_split_keeps_each_patient_on_one_side(tmp_path: Path) -> None:
    from gpuready.workloads.dataset.convert import Entry, split

    entries = [Entry(f"{p:08d}_{k:03d}.png", tmp_path, (0,) * 14, str(p)) for p in range(200) for k in range(3)]
    parts = split(entries, tmp_path, test_fraction=0.2)
    train, test = ({e.patient for e in parts[s]} for s in ("train", "test"))
    assert not train & test
    assert 0.1 < len(test) / 200 < 0.3
