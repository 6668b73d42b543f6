"""Training smoke-run settings and the performance references it is judged against."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuready.core.settings.base import Section


class Reference(Section):
    """A ReFrame-style reference: the metric must lie in [target*(1+lower), target*(1+upper)]."""

    gpu_model: str = "*"
    gpus: int = Field(ge=1)
    metric: str = "images_per_second"
    target: float
    lower: float = Field(default=-0.1, le=0)
    upper: float | None = None
    unit: str = "images/s"


class Training(Section):
    model: Literal["densenet121", "resnet50"] = "densenet121"
    batch_size: int = Field(default=32, ge=1)
    image_size: int = Field(default=224, ge=32)
    steps: int = Field(default=50, ge=1)
    warmup_steps: int = Field(default=10, ge=0)
    data: str = "synthetic"
    launcher: Literal["local", "ssh", "slurm", "kubernetes"] = "local"
    gpus: list[int] = Field(default_factory=lambda: [1])
    mixed_precision: bool = False
    xla: bool = False
    references: list[Reference] = Field(default_factory=list)
