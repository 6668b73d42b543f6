"""The GPU node roles applied for real to Debian 12 roots through `gpuready provision cluster`.

Real parts: a Debian 12 root built with mmdebstrap, Ansible's chroot connection, apt and dpkg
inside the root, a signed local apt repository of stand-in NVIDIA packages, Debian's containerd
configuration, and the root's SELinux policy store (semanage, matchpathcon).
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ModuleTmp, require
from tests.integration.provision import debian_root as dr

pytestmark = [pytest.mark.root, pytest.mark.slow]
CONTAINERD = "etc/containerd/config.toml"


@pytest.fixture(scope="module")
def repo(module_tmp: ModuleTmp) -> Path:
    ok, why = dr.prerequisites()
    require(ok, why)
    return dr.build_repo(module_tmp("standin"))


def _root(tmp: Path, repo: Path) -> Iterator[Path]:
    root = dr.fresh_root(tmp / "root", repo)
    with dr.booted_like(root):
        yield root


@pytest.fixture(scope="module")
def node(repo: Path, module_tmp: ModuleTmp) -> Iterator[tuple[Path, Path]]:
    """A root that ran another branch's driver (535) before gpuready, with SELinux policy to evaluate rules."""
    tmp = module_tmp("node")
    for root in _root(tmp, repo):
        dr.install_in_root(
            root,
            "nvidia-driver_535.183.01-1_all.deb",
            "cuda-drivers-535_535.183.01-1_all.deb",
            "nvidia-persistenced_550.90.07-1_all.deb",
            "nvidia-fabricmanager-535_535.183.01-1_all.deb",
        )
        dr.load_container_selinux_standin(root)
        # An earlier gpuready added the seed's broad kubelet rule: the role must take it away.
        subprocess.run(
            ["chroot", str(root), "semanage", "fcontext", "-a", "-t", "container_file_t", "/var/lib/kubelet/.*/.*"],
            check=True,
            capture_output=True,
        )
        dr.install_in_root(root, "mft-standin_4.30.0-1_all.deb")
        # No /dev/mst yet: as on a booted node before `mst start`.
        fabric = {
            "type": "roce",
            "ports": ["mlx5_0", "mlx5_1"],
            "ats": True,
            "mst_devices": ["/dev/mst/mt4123_pciconf0"],
            "gpudirect_rdma": True,
            "mtu": 9000,
        }
        # The root's policy is SELinux-enabled while the host kernel runs without it: say so explicitly.
        # Its links are the host's (a chroot shares the network): fabric_manage_links is off; it has no
        # kernel of its own to load modules into: fabric_load_modules is off.
        inventory = dr.write_inventory(
            tmp / "inventory",
            {"node1": root},
            # An NVSwitch (HGX) class: Fabric Manager of the pinned driver's version replaces the old branch's.
            settings={"node_classes": {"standin": {"gpu_count": 0, "fabric": fabric, "nvswitch": True}}},
            host_vars={
                "gpu_selinux_status": "enabled",
                "gpu_selinux_ignore_state": True,
                "fabric_manage_links": False,
                "fabric_load_modules": False,
            },
        )
        yield root, inventory


def _events(summary_run: Path, task: str) -> list[dict[str, Any]]:
    events = []
    for path in sorted(summary_run.glob("ansible/artifacts/*/job_events/*.json")):
        event = json.loads(path.read_text())
        if event.get("event_data", {}).get("task") == task:
            events.append(event)
    return events


def _original(member: str) -> bytes:
    with tarfile.open(dr.root_tarball()) as tar:
        return tar.extractfile(f"./{member}").read()


@pytest.fixture(scope="module")
def first(node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, dict[str, Any], Path]:
    _, inventory = node
    runs = module_tmp("first")
    done, summary = dr.provision(inventory, runs, "--diff")
    return done, summary, next(runs.iterdir())


@pytest.fixture(scope="module")
def second(first: Any, node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, dict[str, Any]]:
    root, inventory = node
    before = dr.snapshot(root, "etc", "usr", "var/lib/dpkg")
    done, summary = dr.provision(inventory, module_tmp("second"))
    return done, summary, before, dr.snapshot(root, "etc", "usr", "var/lib/dpkg")


@pytest.fixture(scope="module")
def drifted(second: Any, node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, ...]:
    """A no-change run's files edited behind gpuready's back: one mode, one content, one file gone."""
    root, inventory = node
    sources = root / "etc/apt/sources.list.d/gpuready-cuda.sources"
    blacklist = root / "etc/modprobe.d/blacklist-nouveau.conf"
    toolkit = root / "etc/apt/sources.list.d/gpuready-nvidia-container-toolkit.sources"
    wanted = {path: (path.read_bytes(), path.stat().st_mode & 0o7777) for path in (sources, blacklist, toolkit)}
    sources.chmod(0o600)
    blacklist.write_text(blacklist.read_text().replace("modeset=0", "modeset=1"))
    toolkit.unlink()
    # And the NIC's firmware was reset since (the stand-in's NVRAM: Next Boot becomes Current).
    ats = root / "var/lib/mlxconfig-standin/mt4123_pciconf0"
    ats.with_name(ats.name + ".current").write_bytes(ats.read_bytes())
    done, summary = dr.provision(inventory, module_tmp("drifted"))
    return done, summary, wanted


@pytest.fixture(scope="module")
def removed(drifted: Any, node: tuple[Path, Path], module_tmp: ModuleTmp) -> tuple[Any, dict]:
    _, inventory = node
    return dr.provision(inventory, module_tmp("removed"), "--remove")


def test_first_apply_passes_and_reports_what_a_root_cannot_do(first: Any) -> None:
    done, summary, _ = first
    assert done.returncode == 0, done.stdout + done.stderr
    checks = dr.checks_by_id(summary)
    assert checks["provision.apply"]["status"] == "passed"
    assert summary["metrics"]["changed"] > 0
    # Reboot, services and initramfs are impossible in a root: said, with the variable that switched them off. The
    # driver is pending (its boot finishes it), the run passes.
    assert checks["driver.loaded"]["status"] == "pending"
    assert "reboot required" in checks["driver.loaded"]["message"]
    assert "nvidia_driver_manage_kernel is false" in checks["driver.loaded"]["message"]
    assert "nvidia_driver_manage_services is false" in checks["driver.persistenced"]["message"]
    assert "nvidia_container_toolkit_manage_services is false" in checks["container_runtime.restart"]["message"]


def test_the_cuda_repository_is_configured_with_its_signing_key(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    sources = (root / "etc/apt/sources.list.d/gpuready-cuda.sources").read_text()
    assert f"URIs: {dr.REPO_URL}" in sources
    assert "Signed-By: /etc/apt/keyrings/gpuready-cuda.asc" in sources
    assert (root / "etc/apt/keyrings/gpuready-cuda.asc").read_text() == (
        root / dr.REPO_IN_ROOT / "3bf863cc.pub"
    ).read_text()


def test_the_pinned_version_is_installed_and_the_other_branch_replaced(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    installed = dr.installed_packages(root)
    # 550.90.07 is newer in the repository: the pin, not the newest, must win; the 535 branch must be gone.
    assert installed["nvidia-driver"] == "550.54.15-1"
    assert installed["cuda-drivers-550"] == "550.54.15-1"
    assert "cuda-drivers-535" not in installed
    assert f"linux-headers-{dr.STANDIN_KERNEL}" in installed
    smi = subprocess.run(
        ["chroot", str(root), "nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert smi.stdout.strip() == "550.54.15"


def test_fabric_manager_is_installed_at_the_pinned_driver_version(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    installed = dr.installed_packages(root)
    # 550.90.07 is newer in the repository: Fabric Manager must follow the driver's pin, not the newest.
    assert installed["nvidia-fabricmanager-550"] == "550.54.15-1" == installed["nvidia-driver"]
    assert "nvidia-fabricmanager-535" not in installed  # the old branch's goes with its driver
    finding = dr.checks_by_id(first[1])["driver.fabric_manager"]
    assert finding["status"] == "skipped"
    assert finding["message"] == (
        "Fabric Manager 550.54.15 installed, matches the driver; nvidia-fabricmanager not enabled here: "
        "services are not managed"
    )


def test_nouveau_is_blacklisted_and_the_initramfs_rebuild_requested(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    _, summary, _ = first
    blacklist = (root / "etc/modprobe.d/blacklist-nouveau.conf").read_text()
    assert "blacklist nouveau" in blacklist and "options nouveau modeset=0" in blacklist
    finding = dr.checks_by_id(summary)["driver.nouveau"]
    assert finding["status"] == "skipped"
    assert "initramfs rebuild needed, not run here (nvidia_driver_rebuild_initramfs is false)" in finding["message"]
    assert finding["remedy"] == "run update-initramfs -u -k all on the booted node"


def test_the_initramfs_is_rebuilt_before_the_reboot_decision_is_acted_on(first: Any) -> None:
    """Ansible's own event stream: the initramfs handler ran (here: skipped, no kernel) before the reboot task."""
    _, _, run = first
    events = sorted(run.glob("ansible/artifacts/*/job_events/*.json"), key=lambda p: int(p.name.split("-")[0]))
    tasks = [json.loads(p.read_text()).get("event_data", {}).get("task") for p in events]
    assert tasks.index("Driver | Rebuild the initramfs") < tasks.index(
        "Driver | Reboot the node to load the new driver"
    )


def test_containerd_gets_the_nvidia_runtime_and_its_backup_is_kept(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    # NVIDIA's nvidia-ctk (1.17 and newer) writes the runtime into a drop-in that config.toml imports.
    config = (root / CONTAINERD).read_text()
    drop_in = (root / "etc/containerd/conf.d/99-nvidia.toml").read_text()
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in config
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in drop_in
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in drop_in
    assert (root / f"{CONTAINERD}.gpuready-backup").read_bytes() == _original(CONTAINERD)
    assert "nvidia-container-toolkit" in dr.installed_packages(root)


def test_the_selinux_rules_in_the_diff_equal_the_seed_table(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    _, _, run = first
    # The Dell/Red Hat TFJobs paper's rules, the kubelet one narrowed to the device plugins' folder, the binaries' one
    # to regular files; its device rule is the policy's own (/dev/nvidia.* for character devices): (ftype, type).
    seed = {
        "/usr/bin/nvidia-.*": ("f", "xserver_exec_t"),
        "/var/lib/kubelet/device-plugins(/.*)?": ("a", "container_file_t"),
    }
    diffs = [
        e["event_data"]["res"]["diff"]["prepared"]
        for e in _events(run, "SELinux | Set the file-context rules")
        if e["event"] == "runner_item_on_ok"
    ]
    added = {}
    for diff in diffs:
        for line in diff.splitlines():
            if line.startswith("+"):
                target, ftype, context = line[1:].split()
                added[target] = (ftype, context.split(":")[2])
    assert added == seed

    def rules(*args: str) -> dict[str, tuple[str, str]]:
        """semanage's rules, by target: the file type in its words ("regular file", "all files") and the type."""
        listed = subprocess.run(
            ["chroot", str(root), "semanage", "fcontext", "-l", *args], capture_output=True, text=True, check=True
        ).stdout
        return {
            line.split()[0]: (" ".join(line.split()[1:-1]), line.split()[-1].split(":")[2])
            for line in listed.splitlines()
            # Rules only: not the paths the policy leaves unlabelled (<<None>>) nor its equivalences (/bin = /usr/bin).
            if line.startswith("/") and line.split()[-1].count(":") >= 3
        }

    assert rules("-C") == {
        "/usr/bin/nvidia-.*": ("regular file", "xserver_exec_t"),
        "/var/lib/kubelet/device-plugins(/.*)?": ("all files", "container_file_t"),
    }
    assert rules()["/dev/nvidia.*"] == ("character device", "xserver_misc_device_t")  # Debian's policy's own

    def label(path: str, mode: str) -> str:
        answer = subprocess.run(
            ["chroot", str(root), "matchpathcon", "-m", mode, path], capture_output=True, text=True, check=True
        ).stdout
        return answer.split()[1].split(":")[2]

    # The policy's own answer: the GPU paths are labelled, and pods' volumes are no longer container_file_t.
    assert label("/dev/nvidia0", "chr_file") == "xserver_misc_device_t"
    assert label("/usr/bin/nvidia-smi", "file") == "xserver_exec_t"
    assert label("/var/lib/kubelet/device-plugins/nvidia-gpu.sock", "sock_file") == "container_file_t"
    assert label("/var/lib/kubelet/pods/x", "dir") != "container_file_t"
    # Nothing else under those names: /dev/nvidia-caps is a directory, a link in /usr/bin keeps a link's label.
    assert label("/dev/nvidia-caps", "dir") != "xserver_misc_device_t"
    assert label("/usr/bin/nvidia-cuda-mps-control-link", "lnk_file") != "xserver_exec_t"


def test_containers_may_open_the_gpu_devices_persistently(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    _, summary, _ = first
    assert dr.persistent_booleans(root)["container_use_xserver_devices"] == "on"
    finding = dr.checks_by_id(summary)["selinux.device_boolean"]
    assert (finding["status"], finding["message"]) == (
        "passed",
        "switched on container_use_xserver_devices (persistent)",
    )


def test_fabric_ats_is_enabled_with_a_reboot_required_and_the_port_map_reported(
    first: Any, node: tuple[Path, Path]
) -> None:
    root, _ = node
    _, summary, _ = first
    checks = dr.checks_by_id(summary)
    assert (root / "dev/mst/mt4123_pciconf0").exists()  # mst start ran before mlxconfig needed the device
    assert (root / "var/lib/mlxconfig-standin/mt4123_pciconf0").read_text().strip() == "True(1)"
    assert checks["fabric.ats"]["status"] == "pending"
    assert checks["fabric.ats"]["message"] == ATS_WAITING
    assert "mlx5_1 port 1 ==> ens1f1np1 (Down)" in checks["fabric.ports"]["evidence"]
    assert checks["fabric.ports"]["status"] == "skipped"
    assert checks["fabric.ports"]["message"] == "down, not brought up here (fabric_manage_links is false): mlx5_1"


ATS_WAITING = "ATS set for the next boot on /dev/mst/mt4123_pciconf0: a firmware reset or reboot makes it active"


def _root_run(root: Path, *args: str) -> str:
    """A command's output inside the root (ifup --no-act prints its commands on stderr)."""
    done = subprocess.run(["chroot", str(root), *args], check=True, capture_output=True, text=True)
    return done.stdout + done.stderr


def test_fabric_ports_come_up_at_every_boot_through_debians_ifupdown(first: Any, node: tuple[Path, Path]) -> None:
    """Debian's own ifupdown, inside the root, reads what the role wrote: interfaces(5) `auto` stanzas are
    what `ifup -a` brings up at boot; the `manual` method takes the `mtu` option."""
    root, _ = node
    _, summary, _ = first
    assert set(_root_run(root, "ifquery", "--list", "--allow=auto").split()) >= {"ens1f0np0", "ens1f1np1"}
    for netdev in ("ens1f0np0", "ens1f1np1"):
        assert "mtu: 9000" in _root_run(root, "ifquery", netdev).splitlines()
    # What ifup would run at boot (--no-act prints, runs nothing): the MTU, then the link up.
    would = _root_run(root, "ifup", "--no-act", "--force", "ens1f1np1")
    assert "ip link set dev ens1f1np1 mtu 9000" in would
    assert "ip link set dev ens1f1np1 up" in would
    finding = dr.checks_by_id(summary)["fabric.links"]
    assert finding["status"] == "passed"
    assert finding["message"] == (
        "ens1f0np0, ens1f1np1 up at boot, MTU 9000 through /etc/network/interfaces.d/gpuready-fabric (written)"
    )


def test_nvidia_peermem_loads_at_every_boot_on_a_gpudirect_node(first: Any, node: tuple[Path, Path]) -> None:
    root, _ = node
    _, summary, _ = first
    # systemd-modules-load reads one module name per line (modules-load.d(5)).
    assert (root / "etc/modules-load.d/nvidia-peermem.conf").read_text() == "nvidia_peermem\n"
    finding = dr.checks_by_id(summary)["fabric.peermem"]
    assert finding["status"] == "skipped"
    assert finding["message"] == (
        "nvidia_peermem not loaded here (fabric_load_modules is false), listed in "
        "/etc/modules-load.d/nvidia-peermem.conf (added)"
    )


def test_the_second_run_changes_nothing(second: Any) -> None:
    done, summary, before, after = second
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary["metrics"]["changed"] == 0, summary["metrics"]["playbooks"]
    assert after == before
    # Nothing reset the NIC's firmware since: ATS is still only set for the next boot, still pending.
    ats = dr.checks_by_id(summary)["fabric.ats"]
    assert (ats["status"], ats["message"]) == ("pending", ATS_WAITING)


def test_files_changed_behind_gpuready_are_put_back(drifted: Any) -> None:
    done, summary, wanted = drifted
    assert done.returncode == 0, done.stdout + done.stderr
    for path, (content, mode) in wanted.items():
        assert (path.read_bytes(), path.stat().st_mode & 0o7777) == (content, mode), path
    changed = set(summary["metrics"]["playbooks"][0]["changed_tasks"]["node1"])
    assert {
        "Driver | Configure the CUDA repository",
        "Driver | Blacklist nouveau",
        "Container runtime | Configure the toolkit repository",
    } <= changed, changed


def test_ats_is_passed_once_a_firmware_reset_made_it_current(drifted: Any) -> None:
    _, summary, _ = drifted
    ats = dr.checks_by_id(summary)["fabric.ats"]
    assert (ats["status"], ats["message"]) == ("passed", "ATS already enabled on /dev/mst/mt4123_pciconf0")


def test_remove_restores_the_backup_and_drops_the_rules_but_keeps_the_driver(
    removed: Any, node: tuple[Path, Path]
) -> None:
    root, _ = node
    summary = dr.passed(removed)
    assert (root / CONTAINERD).read_bytes() == _original(CONTAINERD)
    assert not (root / f"{CONTAINERD}.gpuready-backup").exists()
    local = subprocess.run(
        ["chroot", str(root), "semanage", "fcontext", "-l", "-C"], capture_output=True, text=True, check=True
    ).stdout
    assert not [line for line in local.splitlines() if line.startswith("/")]
    assert dr.persistent_booleans(root)["container_use_xserver_devices"] == "on"  # left as it is, as documented
    checks = dr.checks_by_id(summary)
    assert checks["driver.remove"]["status"] == "skipped"  # gpuready.driver.remove_on_uninstall is false
    assert dr.installed_packages(root)["nvidia-driver"] == "550.54.15-1"
    assert "preflight.os" not in checks  # removal does not depend on preflight


@pytest.fixture(scope="module")
def fresh(repo: Path, module_tmp: ModuleTmp) -> Iterator[tuple[Path, Path]]:
    tmp = module_tmp("fresh")
    for root in _root(tmp, repo):
        yield root, dr.write_inventory(tmp / "inventory", {"fresh1": root})


def test_check_mode_on_a_fresh_root_changes_nothing(fresh: tuple[Path, Path], tmp_path: Path) -> None:
    root, inventory = fresh
    before = dr.snapshot(root, "etc", "usr", "var/lib/dpkg")
    summary = dr.passed(dr.provision(inventory, tmp_path / "runs", "--check", "--diff"))
    assert dr.snapshot(root, "etc", "usr", "var/lib/dpkg") == before
    checks = dr.checks_by_id(summary)
    assert checks["driver.packages"]["status"] == "skipped"
    assert (
        "would install linux-headers-6.1.0-gpuready-standin cuda-drivers-550=550.54.15-*"
        in checks["driver.packages"]["message"]
    )
    assert checks["container_runtime.configure"]["message"].startswith("check mode: would run nvidia-ctk for")
    assert summary["metrics"]["check_mode"] is True


def test_selinux_disabled_reports_and_changes_nothing(fresh: tuple[Path, Path], tmp_path: Path) -> None:
    root, inventory = fresh
    before = dr.snapshot(root, "etc", "var/lib/selinux")
    summary = dr.passed(dr.provision(inventory, tmp_path / "runs", "--tags", "selinux"))
    finding = dr.checks_by_id(summary)["selinux.file_contexts"]
    assert (finding["status"], finding["message"]) == ("skipped", "SELinux disabled: nothing changed")
    assert summary["metrics"]["changed"] == 0
    assert dr.snapshot(root, "etc", "var/lib/selinux") == before


def test_a_runtime_that_is_not_installed_is_one_clear_failure(fresh: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = fresh
    inventory = dr.write_inventory(tmp_path / "inventory", {"fresh1": root}, settings={"container_runtime": "crio"})
    done, summary = dr.provision(inventory, tmp_path / "runs", "--check", "--tags", "container_runtime")
    assert done.returncode == 1, done.stdout + done.stderr
    [failure] = [c for c in summary["checks"] if c["status"] == "failed"]
    assert "container runtime crio is not installed on this host" in failure["message"]
    assert "Traceback" not in done.stderr


def test_with_the_kernel_managed_the_loaded_modules_are_read_from_sysfs(
    fresh: tuple[Path, Path], tmp_path: Path
) -> None:
    """A root has no kernel of its own: its /sys is a plain folder, filled here as a booted node's would be."""
    root, _ = fresh
    inventory = dr.write_inventory(
        tmp_path / "inventory", {"fresh1": root}, host_vars={"nvidia_driver_manage_kernel": True}
    )
    module = root / "sys" / "module"
    (module / "nvidia").mkdir(parents=True)
    (module / "nvidia" / "version").write_text("550.54.15\n")
    (module / "nouveau").mkdir()
    try:
        done, summary = dr.provision(inventory, tmp_path / "runs", "--check", "--tags", "driver")
    finally:
        (module / "nvidia" / "version").unlink()
        (module / "nvidia").rmdir()
        (module / "nouveau").rmdir()
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = dr.checks_by_id(summary)["driver.loaded"]
    assert "/sys/module/nvidia/version 550.54.15; nouveau loaded" in loaded["evidence"], loaded


def test_a_first_install_reaches_the_reboot_decision_while_persistenced_cannot_start(
    repo: Path, tmp_path: Path
) -> None:
    """Before the reboot that loads the new module there is no /dev/nvidiactl and nvidia-persistenced exits (the node
    double fails as the daemon does): the role must enable it for the boot, not start it and lose the host. The
    inventory withholds the reboot (allow_reboot false, the default): the driver, nvidia-persistenced and the
    NVSwitch class's Fabric Manager are pending on it, and the run passes."""
    for root in _root(tmp_path, repo):
        units = dr.install_systemctl_double(root)
        inventory = dr.write_inventory(
            tmp_path / "inventory",
            {"first1": root},
            settings={"node_classes": {"standin": {"gpu_count": 0, "nvswitch": True}}},
            host_vars={"nvidia_driver_manage_services": True, "nvidia_driver_manage_kernel": True},
        )
        done, summary = dr.provision(inventory, tmp_path / "runs", "--tags", "driver")
        checks = dr.checks_by_id(summary)
        assert not [c for c in summary["checks"] if c["status"] in ("failed", "error")], summary["checks"]
        loaded = checks["driver.loaded"]
        assert (loaded["status"], loaded["message"]) == (
            "pending",
            "reboot required: driver 550.54.15 installed, none loaded (gpuready.driver.allow_reboot is false)",
        )
        assert "then run gpuready validate gpu-node: driver.nvidia_smi and driver.version pass" in loaded["remedy"]
        persistenced = checks["driver.persistenced"]
        assert (persistenced["status"], persistenced["message"]) == (
            "pending",
            "nvidia-persistenced enabled, not started: it starts once driver 550.54.15 is loaded (after the reboot)",
        )
        fabric_manager = checks["driver.fabric_manager"]
        assert (fabric_manager["status"], fabric_manager["message"]) == (
            "pending",
            "Fabric Manager 550.54.15 enabled; it starts with the new driver after the reboot",
        )
        assert (units / "nvidia-persistenced.enabled").exists()
        assert (units / "nvidia-fabricmanager.enabled").exists()
        calls = (units / "calls").read_text().splitlines()
        assert not [c for c in calls if c.split()[0] in ("start", "restart")], calls
        assert summary["status"] == "passed" and summary["counts"]["pending"] == 3
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_node_set_up_the_way_nvidia_documents_keeps_a_working_apt(repo: Path, tmp_path: Path) -> None:
    """cuda-keyring's source and the toolkit guide's list are there before gpuready: its roles reuse them, so apt
    sees one keyring per repository and `apt-get update` works (a second entry with another keyring fails it with
    "Conflicting values set for option Signed-By")."""
    for root in _root(tmp_path, repo):
        dr.seed_nvidia_apt_setup(root)
        inventory = dr.write_inventory(
            tmp_path / "inventory",
            {"nvidia1": root},
            host_vars={"nvidia_container_toolkit_repo_url": f"file://{dr.TOOLKIT_ARCH_BASE}amd64/"},
        )
        summary = dr.passed(dr.provision(inventory, tmp_path / "first", "--tags", "driver,container_runtime"))
        update = subprocess.run(["chroot", str(root), "apt-get", "update"], capture_output=True, text=True)
        assert update.returncode == 0, update.stdout + update.stderr
        assert "Conflicting values" not in update.stderr
        lists = root / "etc/apt/sources.list.d"
        # NVIDIA's two files, and gpuready's only for Debian's contrib component (another repository).
        assert sorted(p.name for p in lists.iterdir()) == [
            "cuda-debian12-x86_64.list",
            "gpuready-debian-components.sources",
            "nvidia-container-toolkit.list",
        ]
        assert dr.checks_by_id(summary)["driver.repository"]["message"] == (
            "CUDA repository served by /etc/apt/sources.list.d/cuda-debian12-x86_64.list "
            "(Signed-By /usr/share/keyrings/cuda-archive-keyring.gpg): kept, no second entry"
        )
        installed = dr.installed_packages(root)
        assert installed["nvidia-driver"] == "550.54.15-1"
        assert installed["nvidia-container-toolkit"] == f"{dr.TOOLKIT_VERSION}-1"
        again, summary = dr.provision(inventory, tmp_path / "second", "--tags", "driver,container_runtime")
        assert again.returncode == 0, again.stdout + again.stderr
        assert summary["metrics"]["changed"] == 0, summary["metrics"]["playbooks"]


def _apply_driver_branch(root: Path, host: str, branch: str, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """The driver role alone on ``root`` (as ``host``), with ``branch`` from the stand-in repository, no version."""
    settings = {"driver": {"branch": branch, "version": "", "repo_url": dr.REPO_URL}}
    inventory = dr.write_inventory(tmp_path / "inventory", {host: root}, settings=settings)
    return dr.provision(inventory, tmp_path / "runs", "--tags", "driver")


def test_debian_holds_the_branch_against_a_newer_one_in_the_same_repository(repo: Path, tmp_path: Path) -> None:
    """The stand-in repository, as NVIDIA's, has a newer branch (590) under the same unversioned names: with branch
    550 and no version, apt must install and keep 550's newest, by apt's own candidate choice."""
    for root in _root(tmp_path, repo):
        done, _ = _apply_driver_branch(root, "hold1", "550", tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert dr.installed_packages(root)["nvidia-driver"] == "550.90.07-1"
        policy = subprocess.run(
            ["chroot", str(root), "apt-cache", "policy", "nvidia-driver"], capture_output=True, text=True, check=True
        ).stdout
        assert "Candidate: 550.90.07-1" in policy, policy  # a later apt upgrade stays on the branch
        assert "590.48.01-1" in policy  # the newer branch is there, held off


def test_a_branch_the_repository_does_not_offer_is_refused_with_what_it_offers(repo: Path, tmp_path: Path) -> None:
    for root in _root(tmp_path, repo):
        done, summary = _apply_driver_branch(root, "absent1", "580", tmp_path)
        assert done.returncode != 0
        [failure] = [c for c in summary["checks"] if c["status"] == "failed"]
        assert (
            f"driver branch 580 with proprietary kernel modules is not in {dr.REPO_URL} (branches there: "
            "535 proprietary only, 550 proprietary only, 590 proprietary only)"
        ) in " ".join(failure["message"].split())
        assert "nvidia-driver" not in dr.installed_packages(root)
