"""What one worker reads of the converter's TFRecords and how, the same for the tf.data and the PyTorch
input pipelines: the pipeline kinds, the normalisation, and the options both frameworks' pipelines take."""

from __future__ import annotations

from dataclasses import dataclass

#: "new" shards the file list first and decodes in parallel; "old" decodes every record everywhere, then shards
PIPELINES = ("new", "old")
MEAN = (0.485, 0.456, 0.406)  # ImageNet statistics, as CheXNet normalised its inputs
STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Reading:
    """One worker's part of the records (``rank`` of ``workers``) and how it takes them: batches of
    ``batch_size`` square images of ``image_size``; training shuffles, flips and drops the last short batch;
    ``epochs`` None repeats forever; ``seed`` None shuffles differently each run."""

    batch_size: int
    image_size: int
    rank: int = 0
    workers: int = 1
    training: bool = True
    epochs: int | None = None
    seed: int | None = None


def check_kind(kind: str) -> None:
    if kind not in PIPELINES:
        raise ValueError(f"unknown pipeline {kind!r}; choose one of {', '.join(PIPELINES)}")
