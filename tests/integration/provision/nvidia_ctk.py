"""NVIDIA's nvidia-ctk, built from its Go module at a pinned release and cached by version.

The binary goes to ``${XDG_CACHE_HOME:-~/.cache}/gpuready/nvidia-ctk/<version>/nvidia-ctk``, never into the
source tree; a second build of the same version is a no-op. The build needs Go and a C compiler (cgo).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

MODULE = "github.com/NVIDIA/nvidia-container-toolkit"
VERSION = "v1.20.1"
GO = os.environ.get("GPUREADY_GO", "/usr/local/go/bin/go")


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gpuready" / "nvidia-ctk"


def prerequisites() -> tuple[bool, str]:
    if not Path(GO).is_file() and shutil.which("go") is None:
        return False, f"Go not found at {GO} (set GPUREADY_GO)"
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return False, "no C compiler: nvidia-ctk needs cgo"
    return True, ""


def build(version: str = VERSION) -> Path:
    """The nvidia-ctk binary of ``version``, built once per user and version."""
    target = cache_dir() / version / "nvidia-ctk"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            go = GO if Path(GO).is_file() else "go"
            env = {**os.environ, "GOBIN": tmp, "CGO_ENABLED": "1", "GOFLAGS": "-mod=mod"}
            subprocess.run(
                ["nice", "-n", "10", go, "install", f"{MODULE}/cmd/nvidia-ctk@{version}"],
                env=env,
                cwd=tmp,
                check=True,
                capture_output=True,
                timeout=1800,
            )
            os.replace(Path(tmp) / "nvidia-ctk", target)
    return target
