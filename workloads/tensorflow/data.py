"""tf.data input pipelines for ChestX-ray14 TFRecords: Dell's CheXNet tuning article's "new" approach and the "old" one.

The new one shards the file list first (each worker opens only its own files), reads files in
parallel, and parses and batches in parallel; the old one parses every record on every worker
sequentially and shards afterwards, which is why it stalls GPUs and does not scale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from gpuready.workloads.dataset.labels import PATHOLOGIES
from gpuready.workloads.dataset.reading import MEAN, STD, Reading, check_kind

FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "labels": tf.io.FixedLenFeature([len(PATHOLOGIES)], tf.int64),
    "name": tf.io.FixedLenFeature([], tf.string),
}


def shard_files(data_dir: str, split: str) -> list[str]:
    files = sorted(tf.io.gfile.glob(f"{data_dir}/{split}-*.tfrecord"))
    if not files:
        raise FileNotFoundError(f"no {split}-*.tfrecord files in {data_dir} (convert the data first)")
    return files


def _parser(image_size: int, training: bool, with_names: bool) -> Callable[[Any], tuple[Any, ...]]:
    def parse(record: tf.Tensor) -> tuple[Any, ...]:
        example = tf.io.parse_single_example(record, FEATURES)
        image = tf.io.decode_png(example["image"], channels=3)
        image = tf.image.resize(image, (image_size, image_size))
        if training:
            image = tf.image.random_flip_left_right(image)
        image = (image / 255.0 - MEAN) / STD
        labels = tf.cast(example["labels"], tf.float32)
        return (image, labels, example["name"]) if with_names else (image, labels)

    return parse


def new(
    files: list[str], reading: Reading, *, shuffle_buffer: int = 1024, cycle_length: int = 8, with_names: bool = False
) -> tf.data.Dataset:
    """``cycle_length`` files read at once; ``with_names`` adds each image's name to its batch."""
    batch_size, image_size, training, seed = reading.batch_size, reading.image_size, reading.training, reading.seed
    autotune = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.shard(reading.workers, reading.rank)  # first: each worker reads only its own files
    if training:
        ds = ds.shuffle(len(files), seed=seed)
    ds = ds.interleave(
        tf.data.TFRecordDataset, cycle_length=cycle_length, num_parallel_calls=autotune, deterministic=not training
    )
    ds = ds.prefetch(batch_size)
    if training:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.repeat(reading.epochs)
    # map then batch: tf.data's map_and_batch_fusion turns these into the one fused parallel op
    ds = ds.map(_parser(image_size, training, with_names), num_parallel_calls=autotune, deterministic=not training)
    ds = ds.batch(batch_size, drop_remainder=training)
    return ds.prefetch(autotune)


def old(
    files: list[str], reading: Reading, *, shuffle_buffer: int = 1024, with_names: bool = False, **_: Any
) -> tf.data.Dataset:
    training = reading.training
    ds = tf.data.TFRecordDataset(tf.data.Dataset.list_files(files, shuffle=False))
    ds = ds.map(_parser(reading.image_size, training, with_names))
    ds = ds.shard(reading.workers, reading.rank)
    if training:
        ds = ds.shuffle(shuffle_buffer, seed=reading.seed)
    ds = ds.repeat(reading.epochs)
    ds = ds.batch(reading.batch_size, drop_remainder=training)
    return ds.prefetch(1)


def build(kind: str, files: list[str], reading: Reading, **options: Any) -> tf.data.Dataset:
    """The ``kind`` pipeline; ``options`` are :func:`new`'s own, of which the old pipeline takes those it has."""
    check_kind(kind)
    return (new if kind == "new" else old)(files, reading, **options)


def synthetic(*, batch_size: int, image_size: int, rank: int = 0) -> tf.data.Dataset:
    """One random batch repeated forever, as tf_cnn_benchmarks does: measures compute and communication only.

    Seeded by rank so workers see different data: identical weights afterwards then prove the
    gradients were averaged, not merely that every worker computed the same thing.
    """
    gen = tf.random.Generator.from_seed(1234 + rank)
    images = gen.normal((batch_size, image_size, image_size, 3))
    labels = tf.cast(gen.uniform((batch_size, len(PATHOLOGIES))) < 0.2, tf.float32)
    return tf.data.Dataset.from_tensors((images, labels)).repeat()
