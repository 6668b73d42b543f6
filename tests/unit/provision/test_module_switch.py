"""The driver role's choice between `dnf module enable` and `dnf module switch-to ... --allowerasing`.

NVIDIA driver installation guide, "Switching between Driver Module Flavors": another enabled stream of the
nvidia-driver module (another branch or kernel-module flavour) is left with
`dnf -y module switch-to nvidia-driver:<stream> --allowerasing`; a node with none enables the branch's stream
(`dnf module enable nvidia-driver:<stream>`). The role's own task runs under Ansible on this machine with
`dnf module list nvidia-driver` as recorded against NVIDIA's repositories (tests/fixtures/apt: RHEL 8 with the
`latest` stream enabled, from NVIDIA/yum-packaging-precompiled-kmod#50; RHEL 9 with none enabled, from
rpm-software-management/dnf5#146). The dnf it calls is a recorder on PATH that writes its arguments: what is under
test is the command the role gives dnf, not dnf.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import ROOT
from tests.unit.provision.local_play import BIN, run_local_play

TASKS = ROOT / "playbooks" / "roles" / "nvidia_driver" / "tasks" / "install-redhat.yml"
TASK = "Driver | Enable the branch's nvidia-driver module stream"
APT = ROOT / "tests" / "fixtures" / "apt"
RHEL8_LATEST_ENABLED = APT / "dnf-module-list-rhel8-latest-enabled.txt"
RHEL9_NONE_ENABLED = APT / "dnf-module-list-rhel9-cut.txt"


def _dnf_called(tmp_path: Path, listing: Path, stream: str) -> list[str]:
    [task] = [t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") == TASK]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "dnf-calls"
    (bin_dir / "dnf").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bin_dir / "dnf").chmod(0o755)
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "nvidia_driver_plan": {"module_stream": stream},
                "nvidia_driver_streams": {"stdout": listing.read_text(), "rc": 0},
            },
            "tasks": [task],
        }
    ]
    done = run_local_play(tmp_path, play, env={"PATH": f"{bin_dir}:{BIN}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def test_another_enabled_stream_is_switched_with_allowerasing(tmp_path: Path) -> None:
    assert _dnf_called(tmp_path, RHEL8_LATEST_ENABLED, "nvidia-driver:550-dkms") == [
        "-y module switch-to nvidia-driver:550-dkms --allowerasing"
    ]


def test_a_node_with_no_enabled_stream_enables_the_branchs(tmp_path: Path) -> None:
    assert _dnf_called(tmp_path, RHEL9_NONE_ENABLED, "nvidia-driver:515-open") == [
        "-y module enable nvidia-driver:515-open"
    ]


def test_the_enabled_stream_itself_is_left_alone(tmp_path: Path) -> None:
    assert _dnf_called(tmp_path, RHEL8_LATEST_ENABLED, "nvidia-driver:latest") == []
