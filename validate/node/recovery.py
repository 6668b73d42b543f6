"""A GPU's recovery action (nvidia-smi -q -x ``gpu_recovery_action``): what it means to do, and the check result
that carries each GPU's action to the run's figures (the metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.core.results import Check

#: nvidia-smi's ``gpu_recovery_action`` -> what to do, from NVIDIA's "Recovery action flag" (GPU memory error
#: management guide, Error Recovery and Response Flags) and NVML's nvmlDeviceGpuRecoveryAction_t (None, GPU reset,
#: node reboot, drain P2P, drain and reset, recover the IMEX domain, bus reset, system reboot). Matched by words,
#: lower case, first match wins: the text differs between releases ("Reset", "GPU Reset Required").
RECOVERY_REMEDY = (
    ("drain and reset", "stop new peer-to-peer work, let the running jobs drain, then reset the GPU (nvidia-smi -r)"),
    ("drain", "stop new peer-to-peer (NVLink) work on the GPU and let the running jobs drain"),
    ("imex", "recover the IMEX domain: restart nvidia-imex on every node of the domain (NVIDIA's IMEX guide)"),
    ("bus", "reset the GPU's PCIe bus (a reboot does it)"),
    ("reboot", "drain the node and reboot it"),
    ("reset", "drain the GPU, stop its processes and reset it (nvidia-smi -r -i <index>), or reboot"),
)


def remedy(action: str) -> str:
    text = action.lower()
    return next(
        (todo for words, todo in RECOVERY_REMEDY if words in text),
        "look the action up in NVML's nvmlDeviceGpuRecoveryAction_t and do what it says",
    )


@dataclass
class RecoveryCheck(Check):
    """gpu.recovery_action's failed result with each asking GPU: index -> (bus id, action)."""

    asking: dict[int, tuple[str, str]] = field(default_factory=dict, repr=False)
