"""TFRecord files read and written without TensorFlow, byte-compatible with TensorFlow's own."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

from gpuready.workloads.dataset import tfrecord

EXAMPLE = {
    "image": [b"\x89PNG fake bytes"],
    "labels": [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    "name": [b"00000001_000.png"],
}


def test_crc32c_matches_the_published_check_value() -> None:
    assert tfrecord.crc32c(b"123456789") == 0xE3069283  # RFC 3720, B.4 / the CRC catalogue's check value


def test_records_and_examples_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "train-00000-of-00001.tfrecord"
    records = [tfrecord.encode_example({**EXAMPLE, "labels": [i % 2] * 14}) for i in range(5)]
    tfrecord.write_records(path, records)
    back = list(tfrecord.read_records(path, verify=True))
    assert back == records
    assert [tfrecord.parse_example(r)["labels"] for r in back] == [[i % 2] * 14 for i in range(5)]
    assert tfrecord.parse_example(back[0])["name"] == EXAMPLE["name"]


def test_corrupt_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.tfrecord"
    tfrecord.write_records(path, [tfrecord.encode_example(EXAMPLE)])
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF  # one byte of the record's data
    path.write_bytes(bytes(data))
    with pytest.raises(tfrecord.CorruptRecord, match="data checksum"):
        list(tfrecord.read_records(path, verify=True))
    path.write_bytes(struct.pack("<Q", 5) + b"\0\0\0\0")
    with pytest.raises(tfrecord.CorruptRecord, match="length checksum"):
        list(tfrecord.read_records(path))


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow (train extra) not installed")
def test_tensorflow_reads_ours_and_we_read_tensorflows(tmp_path: Path) -> None:
    import tensorflow as tf

    from gpuready.workloads.tensorflow.data import FEATURES

    ours = tmp_path / "ours.tfrecord"
    tfrecord.write_records(ours, [tfrecord.encode_example(EXAMPLE)])
    (record,) = list(tf.data.TFRecordDataset(str(ours)).as_numpy_iterator())
    parsed = tf.io.parse_single_example(record, FEATURES)
    assert parsed["labels"].numpy().tolist() == EXAMPLE["labels"] and parsed["image"].numpy() == EXAMPLE["image"][0]
    theirs = tmp_path / "theirs.tfrecord"
    with tf.io.TFRecordWriter(str(theirs)) as writer:
        writer.write(
            tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=EXAMPLE["image"])),
                        "labels": tf.train.Feature(int64_list=tf.train.Int64List(value=EXAMPLE["labels"])),
                        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=EXAMPLE["name"])),
                    }
                )
            ).SerializeToString()
        )
    (record,) = list(tfrecord.read_records(theirs, verify=True))
    assert tfrecord.parse_example(record) == EXAMPLE
