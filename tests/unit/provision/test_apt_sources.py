"""Which apt source already serves a repository, read from the files as NVIDIA's own setup writes them, with apt's
own parser (apt-get indextargets) as the judge of what an entry means where this machine has apt."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require
from tests.unit.provision.local_play import collection_filter

apt_source_for = collection_filter("apt_source_for", "apt_sources")
apt_sources_command = collection_filter("apt_sources_command", "apt_sources")

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
TOOLKIT = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
# cuda-keyring's list (NVIDIA driver installation guide, network repository installation), and the Container Toolkit
# install guide's nvidia-container-toolkit.list after its sed adds the keyring (the experimental line commented out).
CUDA_LIST = f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA} /\n"
TOOLKIT_LIST = (
    "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
    "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    "#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
    "https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n"
)
OURS = "/etc/apt/sources.list.d/gpuready-cuda.sources"
OURS_TEXT = (
    f"# Written by gpuready\nTypes: deb\nURIs: {CUDA}\nSuites: /\nSigned-By: /etc/apt/keyrings/gpuready-cuda.asc\n"
)


def _etc(tmp_path: Path, files: dict[str, str]) -> Path:
    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (etc / name).write_text(text)
    return etc


def _read(etc: Path) -> str:
    return subprocess.run(
        ["sh", "-c", apt_sources_command(str(etc))], capture_output=True, text=True, check=True
    ).stdout


def test_cuda_keyrings_list_serves_the_cuda_repository(tmp_path: Path) -> None:
    etc = _etc(tmp_path, {"sources.list.d/cuda-debian12-x86_64.list": CUDA_LIST})
    assert apt_source_for(_read(etc), CUDA, "amd64") == {
        "file": f"{etc}/sources.list.d/cuda-debian12-x86_64.list",
        "signed_by": "/usr/share/keyrings/cuda-archive-keyring.gpg",
    }


def test_the_toolkit_list_serves_the_architectures_folder_through_arch(tmp_path: Path) -> None:
    etc = _etc(tmp_path, {"sources.list.d/nvidia-container-toolkit.list": TOOLKIT_LIST})
    found = apt_source_for(_read(etc), TOOLKIT, "amd64")
    assert found["signed_by"] == "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    # apt puts the node's architecture there: on arm64 the amd64 folder is another repository.
    assert apt_source_for(_read(etc), TOOLKIT, "arm64") == {}
    # The commented experimental line is no source.
    assert apt_source_for(_read(etc), TOOLKIT.replace("stable", "experimental"), "amd64") == {}


def test_the_roles_own_file_does_not_count_and_a_deb822_file_of_someone_else_does(tmp_path: Path) -> None:
    etc = _etc(tmp_path, {"sources.list.d/gpuready-cuda.sources": OURS_TEXT})
    own = f"{etc}/sources.list.d/gpuready-cuda.sources"
    assert apt_source_for(_read(etc), CUDA, "amd64", own) == {}
    assert apt_source_for(_read(etc), CUDA, "amd64", "/elsewhere") == {
        "file": own,
        "signed_by": "/etc/apt/keyrings/gpuready-cuda.asc",
    }


def test_a_disabled_deb822_entry_and_other_uris_do_not_serve(tmp_path: Path) -> None:
    text = OURS_TEXT + "Enabled: no\n"
    etc = _etc(
        tmp_path,
        {"sources.list.d/cuda.sources": text, "sources.list": "deb http://deb.debian.org/debian bookworm main\n"},
    )
    assert apt_source_for(_read(etc), CUDA, "amd64") == {}


@pytest.mark.parametrize("uri", [CUDA, CUDA.rstrip("/")])
def test_what_the_filter_finds_is_what_apt_itself_reads(tmp_path: Path, uri: str) -> None:
    """apt's own reading of the same files (apt-get indextargets lists each configured index with its URI)."""
    require(shutil.which("apt-get") is not None, "apt-get not installed")
    etc = _etc(tmp_path, {"sources.list.d/cuda-debian12-x86_64.list": CUDA_LIST.replace(CUDA, uri)})
    (etc / "sources.list").write_text("")
    out = subprocess.run(
        [
            "apt-get",
            "-o",
            f"Dir::Etc={etc}",
            "-o",
            "Dir::State=" + str(tmp_path),
            "indextargets",
            "--no-release-info",
            "--format",
            "$(REPO_URI)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert CUDA in out.split()
    assert apt_source_for(_read(etc), CUDA, "amd64")["signed_by"] == "/usr/share/keyrings/cuda-archive-keyring.gpg"
