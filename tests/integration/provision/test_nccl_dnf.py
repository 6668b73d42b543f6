"""The nccl_tests role on the RHEL family: its own tasks choose the packages from recorded RHEL 9 facts and the
recorded H100's nvidia-smi, and its install task puts them into an install root with a real dnf 4.

NVIDIA's rhel repositories carry NCCL built for several CUDA versions, one build per CUDA minor, the CUDA version in
the release (NCCL installation guide, network repository: `dnf install libnccl-2.x.x-1+cudaX.Y
libnccl-devel-2.x.x-1+cudaX.Y`). The stand-in repository has a newer NCCL built only for CUDA 12, an older and a
newer one for CUDA 13: the role must take the newest built for the driver's CUDA major, 13, not the newest overall.
The distribution's make, gcc-c++ and git, and NVIDIA's cuda-nvcc-13-0 and cuda-cudart-dev-13-0, are empty rpms of
those names (the Debian root test builds with the real compiler); what is under test is dnf's reading of the
role's package specs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, ModuleTmp, require
from tests.integration.provision import dnf_root, recorded_facts
from tests.integration.provision.dnf_root import package
from tests.unit.provision.local_play import role_defaults, role_tasks, run_and_read, save

TASKS = role_tasks("nccl_tests", "present.yml")
CHOOSE = TASKS["NCCL tests | Work out the CUDA version and the packages"]
BLOCK = TASKS["NCCL tests | Install, fetch, build and link"]["block"]
INSTALL = next(t for t in BLOCK if t["name"] == "NCCL tests | Install the compiler, NCCL and the build tools (dnf)")
H100_NVIDIA_SMI = ROOT / "tests" / "fixtures" / "gpu" / "recorded" / "h100-80gb-hbm3-580.159.04" / "22-nvidia-smi.out"
pytestmark = pytest.mark.slow
#: (version, release) of NVIDIA's NCCL builds in the stand-in repository.
NCCL = [("2.30.7", "1+cuda13.0"), ("2.28.9", "1+cuda13.0"), ("2.31.0", "1+cuda12.9"), ("2.30.7", "1+cuda12.9")]
OTHERS = ["make", "gcc-c++", "git", "cuda-nvcc-13-0", "cuda-cudart-dev-13-0"]


@pytest.fixture(scope="module")
def dnf(module_tmp: ModuleTmp) -> dnf_root.Root:
    require(*dnf_root.prerequisites())
    work = module_tmp("nccl-dnf")
    top = work / "rpmbuild"
    for version, release in NCCL:
        package(top, "libnccl", 0, version, release=release)
        package(top, "libnccl-devel", 0, version, f"libnccl = {version}-{release}", release=release)
    for name in OTHERS:
        package(top, name, 0, "1.0", release="1.el9")
    dnf_root.repository(work, top, "stand-in of NVIDIA's rhel9 repository")
    return dnf_root.Root(work)


def _install(dnf: dnf_root.Root, tmp_path: Path) -> tuple[dnf_root.Root, Any]:
    """The role's two tasks on localhost with the recorded RHEL 9 facts: what it chose, and whether dnf changed."""
    root = dnf.fresh("ansible-root", home=tmp_path)
    (tmp_path / "dnf.conf").write_text(
        f"[main]\nreposdir={dnf.work / 'repos.d'}\ncachedir={dnf.work / 'cache'}\n"
        f"pluginconfpath={dnf.work / 'plugins'}\n"
    )
    here = {"installroot": str(root.root), "conf_file": str(tmp_path / "dnf.conf"), "releasever": "9"}
    install = INSTALL | {"ansible.builtin.dnf": INSTALL["ansible.builtin.dnf"] | {"use_backend": "dnf4"} | here}
    defaults = role_defaults("nccl_tests")
    gpuready = {"node_classes": {"hgx": {"gpu_count": 8}}, "driver": {"branch": "580"}}
    smi = {"stdout": H100_NVIDIA_SMI.read_text(), "rc": 0}
    cache = recorded_facts.fact_cache(tmp_path / "facts", {"localhost": ("rhel-9", None)})
    play = [
        {
            "hosts": "localhost",
            # The recorded facts from the cache (gathering: smart), not this Debian machine's.
            "gather_facts": True,
            "vars": {**defaults, "gpuready": gpuready, "nccl_tests_smi": smi},
            "tasks": [
                CHOOSE,
                install,
                save(
                    "{'packages': nccl_tests_packages + nccl_tests_nccl_specs, "
                    "'changed': nccl_tests_install_dnf.changed}",
                    tmp_path,
                ),
            ],
        }
    ]
    facts = {"ANSIBLE_GATHERING": "smart", "ANSIBLE_CACHE_PLUGIN": "jsonfile"}
    env = facts | {"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache), "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0"}
    return root, run_and_read(tmp_path, play, "-e", "ansible_python_interpreter=/usr/bin/python3", env=env)


def test_the_newest_nccl_built_for_the_drivers_cuda_major_installs_and_a_second_run_changes_nothing(
    dnf: dnf_root.Root, tmp_path: Path
) -> None:
    root, first = _install(dnf, tmp_path)
    assert first["packages"] == [
        "make",
        "gcc-c++",
        "git",
        "cuda-nvcc-13-0",
        "cuda-cudart-dev-13-0",
        "libnccl-[0-9]*+cuda13.*",
        "libnccl-devel-[0-9]*+cuda13.*",
    ]
    assert first["changed"] is True
    nccl = [p for p in root.installed("%{NAME}-%{VERSION}-%{RELEASE}") if p.startswith("libnccl")]
    assert nccl == ["libnccl-2.30.7-1+cuda13.0", "libnccl-devel-2.30.7-1+cuda13.0"]
    assert {f"{name}-1.0" for name in OTHERS} <= set(root.installed())
    _, second = _install(dnf, tmp_path)
    assert second["changed"] is False
