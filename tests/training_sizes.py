"""The smallest training run the tests and the launcher benchmark start: what they prove (processes, launchers,
allreduce, reports) does not depend on its size. ResNet-50 builds and traces in half DenseNet-121's time on 2 cores;
CheXNet's DenseNet-121 itself is trained in tests/integration/workloads/test_real_data_run.py."""

from __future__ import annotations

#: Steps, warm-up steps, image size and batch of the smallest run.
SMALL = ["--steps", "3", "--warmup-steps", "1", "--image-size", "32", "--batch-size", "4"]
#: The smallest run of the smaller model.
TINY = ["--model", "resnet50", *SMALL]
