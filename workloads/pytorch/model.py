"""DenseNet-121 (Huang et al., "Densely Connected Convolutional Networks", 2017) in plain PyTorch.

Only for machines that have torch without torchvision: the same layers, sizes and parameter count
as ``torchvision.models.densenet121`` (growth rate 32, blocks of 6, 12, 24 and 16 layers,
bottleneck width 4 x 32, transitions halving the channels), so its FLOPs and images/s compare.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


class _Layer(nn.Module):
    def __init__(self, channels: int, growth: int, bottleneck: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(channels)
        self.conv1 = nn.Conv2d(channels, bottleneck * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bottleneck * growth)
        self.conv2 = nn.Conv2d(bottleneck * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.relu(self.norm1(features)))
        return torch.cat([features, self.conv2(F.relu(self.norm2(out)))], 1)


def _transition(channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.BatchNorm2d(channels), nn.ReLU(), nn.Conv2d(channels, channels // 2, 1, bias=False), nn.AvgPool2d(2, 2)
    )


class DenseNet(nn.Module):
    def __init__(
        self, blocks: tuple[int, ...], classes: int, growth: int = 32, stem: int = 64, bottleneck: int = 4
    ) -> None:
        super().__init__()
        layers: list[Any] = [
            nn.Conv2d(3, stem, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(stem),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        ]
        channels = stem
        for i, count in enumerate(blocks):
            for _ in range(count):
                layers.append(_Layer(channels, growth, bottleneck))
                channels += growth
            if i < len(blocks) - 1:
                layers.append(_transition(channels))
                channels //= 2
        layers.append(nn.BatchNorm2d(channels))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.adaptive_avg_pool2d(F.relu(self.features(x)), 1)
        return self.classifier(torch.flatten(out, 1))


def densenet121(classes: int) -> DenseNet:
    return DenseNet((6, 12, 24, 16), classes)
