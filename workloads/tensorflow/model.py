"""The CheXNet model: DenseNet-121 (or ResNet-50) with 14 sigmoid outputs, one per ChestX-ray14 pathology."""

from __future__ import annotations

from typing import Any

from gpuready.workloads.dataset.labels import PATHOLOGIES

MODELS = ("densenet121", "resnet50")


def build(name: str, image_size: int, *, classes: int = len(PATHOLOGIES)) -> Any:
    """A freshly initialised model (no download: the smoke run measures the environment, not ImageNet)."""
    import tensorflow as tf

    backbones = {"densenet121": tf.keras.applications.DenseNet121, "resnet50": tf.keras.applications.ResNet50}
    if name not in backbones:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    inputs = tf.keras.Input((image_size, image_size, 3))
    features = backbones[name](include_top=False, weights=None, input_tensor=inputs, pooling="avg").output
    # float32 outputs even under mixed precision: sigmoid + cross-entropy in float16 lose the rare labels.
    outputs = tf.keras.layers.Dense(classes, activation="sigmoid", dtype="float32", name="pathologies")(features)
    return tf.keras.Model(inputs, outputs, name=f"chexnet_{name}")
