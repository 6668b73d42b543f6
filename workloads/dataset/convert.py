"""Convert ChestX-ray14 from NIH's layout to sharded TFRecords, resizing each image once.

NIH layout: ``Data_Entry_2017.csv`` (columns ``Image Index``, ``Finding Labels`` with labels joined
by ``|``, ``Patient ID``) and the PNGs anywhere below the folder (``images/``, ``images_001/images/``...).
Held-out split: NIH's ``test_list.txt`` when present, otherwise a patient-wise hash split, so no
patient appears in both.

    python -m gpuready.workloads.dataset.convert NIH_DIR OUT_DIR [--size 256] [--shards 64]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gpuready.workloads.dataset.labels import PATHOLOGIES

CSV_NAMES = ("Data_Entry_2017.csv", "Data_Entry_2017_v2020.csv")


@dataclass(frozen=True)
class Entry:
    name: str
    path: Path
    labels: tuple[int, ...]
    patient: str


def read_entries(nih_dir: Path) -> list[Entry]:
    table = next((nih_dir / n for n in CSV_NAMES if (nih_dir / n).is_file()), None)
    if table is None:
        raise FileNotFoundError(f"{nih_dir}: no {' or '.join(CSV_NAMES)}")
    images = {f: Path(root) / f for root, _, files in os.walk(nih_dir) for f in files if f.endswith(".png")}
    entries = []
    with table.open(newline="") as fh:
        for row in csv.DictReader(fh):
            name = row["Image Index"]
            if name not in images:
                continue  # a partial download: convert what is there
            found = set(row["Finding Labels"].split("|"))
            entries.append(
                Entry(
                    name,
                    images[name],
                    tuple(int(p in found) for p in PATHOLOGIES),
                    row.get("Patient ID", name.split("_")[0]),
                )
            )
    if not entries:
        raise FileNotFoundError(f"{nih_dir}: none of the images listed in {table.name} were found")
    return entries


def split(entries: list[Entry], nih_dir: Path, test_fraction: float) -> dict[str, list[Entry]]:
    listed = nih_dir / "test_list.txt"
    if listed.is_file():
        test = set(listed.read_text().split())
        is_test = [e.name in test for e in entries]
    else:
        bucket = [int(hashlib.sha256(e.patient.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF for e in entries]
        is_test = [b < test_fraction for b in bucket]
    return {
        "train": [e for e, t in zip(entries, is_test, strict=True) if not t],
        "test": [e for e, t in zip(entries, is_test, strict=True) if t],
    }


def write_shards(entries: list[Entry], out_dir: Path, split_name: str, shards: int, size: int) -> list[Path]:
    import tensorflow as tf

    shards = max(1, min(shards, len(entries)))
    paths = [out_dir / f"{split_name}-{i:05d}-of-{shards:05d}.tfrecord" for i in range(shards)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    try:
        for i, entry in enumerate(entries):
            image = tf.io.decode_png(tf.io.read_file(str(entry.path)), channels=1)  # X-rays are grey
            image = tf.cast(tf.image.resize(image, (size, size), antialias=True), tf.uint8)
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image": tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[tf.io.encode_png(image).numpy()])
                        ),
                        "labels": tf.train.Feature(int64_list=tf.train.Int64List(value=list(entry.labels))),
                        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[entry.name.encode()])),
                    }
                )
            )
            writers[i % shards].write(example.SerializeToString())
    finally:
        for w in writers:
            w.close()
    return paths


def convert(
    nih_dir: Path, out_dir: Path, *, size: int = 256, shards: int = 64, test_fraction: float = 0.2
) -> dict[str, int]:
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = split(read_entries(nih_dir), nih_dir, test_fraction)
    for name, entries in parts.items():
        if entries:
            write_shards(entries, out_dir, name, shards if name == "train" else max(1, shards // 4), size)
    return {name: len(entries) for name, entries in parts.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("nih_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--size", type=int, default=256, help="side in pixels the images are resized to, once")
    parser.add_argument("--shards", type=int, default=64, help="training files (the held-out split gets 1/4)")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    args = parser.parse_args(argv)
    try:
        counts = convert(
            args.nih_dir, args.out_dir, size=args.size, shards=args.shards, test_fraction=args.test_fraction
        )
    except FileNotFoundError as e:
        parser.exit(2, f"gpuready: error: {e}\n")
    print(" ".join(f"{k}={v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
