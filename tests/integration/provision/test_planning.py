"""Check-mode planning for every distribution we cannot boot here, from recorded facts.

Each host is this machine reached locally, but its facts come from a recording of a real
release (tests/fixtures/facts), put into Ansible's own jsonfile fact cache so the plays'
smart gathering uses them instead of gathering. The roles run in plan-only mode: they work out
and report the repository, package names, module stream and handlers, and change nothing.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.core.collection import collection_dir
from gpuready.core.runner import run_playbook
from tests.conftest import ModuleTmp, require
from tests.integration.provision import netplan, recorded_facts
from tests.integration.provision import nvidia_reference as ref
from tests.unit.provision.local_play import run_local_play

pytestmark = pytest.mark.slow

HANDLERS = [
    "Driver | Rebuild the initramfs",
    "Driver | Restart nvidia-persistenced",
    "Driver | Wait for nvidia-persistenced",
]
SEED_RULES = [
    # The binaries' rule narrowed to regular files; the device rule is the distributions' policies' own.
    {"path": "/usr/bin/nvidia-*", "target": "/usr/bin/nvidia-.*", "ftype": "f", "setype": "xserver_exec_t"},
    # Narrowed from the seed's /var/lib/kubelet/.*/.* to the device plugins' folder.
    {
        "path": "/var/lib/kubelet/device-plugins",
        "target": "/var/lib/kubelet/device-plugins(/.*)?",
        "ftype": "a",
        "setype": "container_file_t",
    },
]


def _inventory(folder: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    settings = {
        "node_classes": {"recorded": {"gpu_count": 0}} | ref.NODE_CLASSES,
        "driver": {"branch": "550"},
        "container_runtime": "containerd",
    }
    common = {
        "ansible_connection": "local",
        # The check of the node's Python runs for real, here: the Python gpuready runs in, as inventories/local.
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        # The inventory's node classes are sorted by name; hosts without their own class are the recorded one.
        "gpuready_node_class": "recorded",
        "nvidia_driver_plan_only": True,
        "nvidia_driver_wanted": True,
        "gpu_selinux_plan_only": True,
        "nvidia_container_toolkit_plan_only": True,
        "nvidia_container_toolkit_wanted": True,
    }
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": common}}))
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
    return folder


@pytest.fixture(scope="module")
def planned(module_tmp: ModuleTmp) -> Any:
    tmp = module_tmp("planning")
    hosts: dict[str, dict[str, Any]] = {
        name: {"nvidia_driver_branch": pin[0], "nvidia_driver_version": pin[1]}
        | ({"gpuready_node_class": ref.NODE_CLASS[name]} if name in ref.NODE_CLASS else {})
        for name, pin in ((n, e["pin"]) for n, e in ref.DRIVER.items())
    }
    hosts |= {name: {"nvidia_driver_branch": branch} for name, (branch, _) in ref.REFUSED.items()}
    hosts["debian-11"] = {}
    # Plan only: the branch is looked up in Ubuntu's archive as recorded (noble's package names).
    noble = tmp / "ubuntu-noble-names.json"
    noble.write_text(json.dumps(ARCHIVE["noble"]))
    hosts["ubuntu-24.04-old-branch"] = {"nvidia_driver_branch": "418", "nvidia_driver_plan_index": str(noble)}
    records = ref.HOSTS | {"debian-11": ("debian-11", None), "ubuntu-24.04-old-branch": ("ubuntu-24.04", None)}
    for name, want in ref.FABRIC_MANAGER.items():
        branch, version = want["pin"]
        hosts[name] = {
            "gpuready_node_class": want["class"],
            "nvidia_driver_branch": branch,
            "nvidia_driver_version": version,
        }
        records[name] = want["facts"]
    for name, want in ref.IMEX.items():
        branch, version = want["pin"]
        hosts[name] = {
            "gpuready_node_class": "gb200-nvl72",
            "nvidia_driver_branch": branch,
            "nvidia_driver_version": version,
        }
        records[name] = want["facts"]
    for name, (facts, node_class, branch, _) in ref.FABRIC_REFUSED.items():
        hosts[name] = {"gpuready_node_class": node_class, "nvidia_driver_branch": branch}
        records[name] = facts
    for name, want in ref.SECURE_BOOT.items():
        branch, version = want["pin"]
        hosts[name] = {
            "nvidia_driver_branch": branch,
            "nvidia_driver_version": version,
            "nvidia_driver_secure_boot": True,
        }
        records[name] = want["facts"]
    for name, host in hosts.items():
        # Rows pinned to a branch NVIDIA has retired say so; the current ones, and the end-of-life refusal, do not.
        host.setdefault("nvidia_driver_allow_end_of_life", name not in ref.CURRENT)
    cache = recorded_facts.fact_cache(tmp / "facts", records)
    return run_playbook(
        "site.yml",
        _inventory(tmp / "inventory", hosts),
        tmp / "runs",
        check=True,
        tags=["driver", "container_runtime", "selinux"],
        fact_cache=cache,
    )


@pytest.mark.parametrize("host", sorted(ref.DRIVER))
def test_driver_plan_matches_the_vendors_packaging(planned: Any, host: str) -> None:
    result = planned.hosts[host]
    assert result.failures == 0 and not result.unreachable, result.failed_tasks
    assert result.changed == 0
    checks = {c.id: c for c in result.checks}
    plan = json.loads(checks["driver.plan"].evidence)
    want = ref.DRIVER[host]
    assert plan["repo"] == want["repo"]
    key = f"{want['repo']}{want.get('key') or ref.KEYS[plan['repo_kind']]}" if want["repo"] else ""
    assert plan["repo_key"] == key
    assert plan["module_stream"] == want["stream"]
    assert plan["packages"] == want["packages"]
    assert plan["versionlock"] == want.get("lock", [])
    assert plan["allowerasing"] is bool(want.get("lock"))  # EL10 switches flavours with --allowerasing
    assert plan["crb_repo"] == want["crb"]
    assert plan["epel"] is want["epel"]
    if "epel_url" in want:
        assert plan["epel_url"] == want["epel_url"]
    assert plan["handlers"] == HANDLERS
    assert "(plan only: nothing changed)" in checks["driver.plan"].message


@pytest.mark.parametrize("host", sorted(ref.DRIVER))
def test_driver_plan_names_the_running_kernel_headers(planned: Any, host: str) -> None:
    record, edit = ref.HOSTS[host]
    recorded = recorded_facts.facts(record, edit)
    plan = json.loads(next(c for c in planned.hosts[host].checks if c.id == "driver.plan").evidence)
    rpm = recorded["os_family"] == "RedHat"
    assert plan["headers"][0] == (
        f"kernel-devel-{recorded['kernel']}" if rpm else f"linux-headers-{recorded['kernel']}"
    )
    assert plan["initramfs_command"] == ("dracut --force --regenerate-all" if rpm else "update-initramfs -u -k all")


# One task refuses a branch, a kernel-module flavour or an NVLink 5 system; its message says which and why.
REFUSAL_TASK = "Driver | Refuse a branch, flavour or NVLink 5 system the distribution cannot serve"
REFUSALS = sorted(
    [(h, REFUSAL_TASK, why) for h, (_, why) in ref.REFUSED.items()]
    + [(h, REFUSAL_TASK, r[3]) for h, r in ref.FABRIC_REFUSED.items()]
)


@pytest.mark.parametrize(("host", "task", "why"), REFUSALS)
def test_what_no_vendor_publishes_is_refused_with_the_reason(planned: Any, host: str, task: str, why: str) -> None:
    [(failed, message)] = planned.hosts[host].failed_tasks
    assert failed == task
    assert why in message


@pytest.mark.parametrize("host", sorted(ref.TOOLKIT_REPO))
def test_container_toolkit_repository_uses_the_vendors_architecture_names(planned: Any, host: str) -> None:
    result = planned.hosts[host]
    plan = json.loads(next(c for c in result.checks if c.id == "container_runtime.plan").evidence)
    assert plan["repo"] == ref.TOOLKIT_REPO[host]
    assert plan["repo_key"] == "https://nvidia.github.io/libnvidia-container/gpgkey"
    assert plan["package"] == "nvidia-container-toolkit"


def test_cuda_repository_of_an_arm64_server_is_sbsa(tmp_path: Path) -> None:
    """Debian is the distribution whose driver comes from NVIDIA's CUDA repository on apt; arm64 is "sbsa" there."""
    edit = {
        "distribution": "Debian",
        "distribution_version": "12.7",
        "distribution_major_version": "12",
        "distribution_release": "bookworm",
        "architecture": "aarch64",
    }
    recorded_facts.fact_cache(tmp_path / "facts", {"debian-arm64": ("ubuntu-24.04", edit)})
    run = run_playbook(
        "site.yml",
        _inventory(tmp_path / "inventory", {"debian-arm64": {"nvidia_driver_branch": "580-open"}}),
        tmp_path / "runs",
        check=True,
        tags=["driver"],
        fact_cache=tmp_path / "facts",
    )
    plan = json.loads(next(c for c in run.hosts["debian-arm64"].checks if c.id == "driver.plan").evidence)
    assert plan["repo"] == f"{ref.CUDA}/debian12/{ref.CUDA_ARCH['aarch64']}/"
    assert plan["packages"] == ["nvidia-open-580", "nvidia-driver"]  # [FM]
    assert plan["components"] == ["contrib"]  # [DIG]: Debian, enable contrib


@pytest.mark.parametrize("host", sorted(ref.DRIVER))
def test_selinux_plan_follows_the_recorded_mode(planned: Any, host: str) -> None:
    finding = next(c for c in planned.hosts[host].checks if c.id == "selinux.file_contexts")
    if host.startswith("ubuntu"):
        assert (finding.status, finding.message) == ("skipped", "SELinux disabled: nothing changed")
    else:
        assert finding.status == "passed"
        assert json.loads(finding.evidence) == SEED_RULES


def test_an_unsupported_distribution_fails_only_that_host(planned: Any) -> None:
    result = planned.hosts["debian-11"]
    [(task, message)] = result.failed_tasks
    assert task == "Driver | Refuse an unsupported distribution"
    assert "nvidia_driver: Debian 11.11 is not supported" in message
    assert all(planned.hosts[h].failures == 0 for h in ref.DRIVER)  # the other hosts went on


def test_a_branch_the_distribution_lacks_fails_only_that_host(planned: Any) -> None:
    [(task, message)] = planned.hosts["ubuntu-24.04-old-branch"].failed_tasks
    assert task == REFUSAL_TASK
    assert (
        "driver branch 418 does not exist for Ubuntu 24 in ubuntu-noble-names.json (branches: 460, 470, 515," in message
    )


# ibdev2netdev's lines as NVIDIA's OFED documentation shows them: "<rdma device> port <n> ==> <netdev> (<state>)".
IBDEV2NETDEV = ["mlx5_0 port 1 ==> ib0 (Up)", "mlx5_1 port 1 ==> ib1 (Down)"]
LINK_HOSTS = {
    "rhel-8": "rhel-8",
    "rhel-9": "rhel-9",
    "rocky-9": "rocky-9",
    "alma-9": "almalinux-9",
    "ubuntu-22.04": "ubuntu-22.04",
    "ubuntu-24.04": "ubuntu-24.04",
}


@pytest.fixture(scope="module")
def links_planned(module_tmp: ModuleTmp) -> Any:
    fabric = {"type": "infiniband", "ports": ["mlx5_0", "mlx5_1"], "mtu": 4092}
    return _plan_links(module_tmp("links"), fabric, LINK_HOSTS)


@pytest.fixture(scope="module")
def roce_planned(module_tmp: ModuleTmp) -> Any:
    fabric = {"type": "roce", "ports": ["mlx5_0", "mlx5_1"]}
    return _plan_links(module_tmp("roce"), fabric, {"rhel-9": LINK_HOSTS["rhel-9"]})


def _plan_links(tmp: Path, fabric: dict[str, Any], hosts: dict[str, str]) -> Any:
    cache = recorded_facts.fact_cache(tmp / "facts", {host: (record, None) for host, record in hosts.items()})
    inventory = tmp / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    common = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "fabric_plan_only": True,
        "fabric_plan_ibdev2netdev": IBDEV2NETDEV,
    }
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump({"gpu_nodes": {"hosts": {h: {} for h in hosts}, "vars": common}})
    )
    (inventory / "group_vars" / "all" / "gpuready.yml").write_text(
        yaml.safe_dump(
            {
                "gpuready": {
                    "node_classes": {"ib": {"gpu_count": 0, "fabric": fabric}},
                    "driver": {"branch": "550"},
                    "container_runtime": "containerd",
                }
            }
        )
    )
    return run_playbook("site.yml", inventory, tmp / "runs", check=True, tags=["fabric"], fact_cache=cache)


def _links(planned: Any, host: str) -> dict[str, Any]:
    result = planned.hosts[host]
    assert result.failures == 0 and not result.unreachable, result.failed_tasks
    assert result.changed == 0
    return json.loads(next(c for c in result.checks if c.id == "fabric.links").evidence)


@pytest.mark.parametrize("host", ["rhel-8", "rhel-9", "rocky-9", "alma-9"])
def test_rhel_family_keeps_fabric_ports_up_with_networkmanager(links_planned: Any, host: str) -> None:
    """Red Hat, "Configuring InfiniBand and RDMA networks", "Configuring an IPoIB connection by using nmcli":
    `nmcli connection add type infiniband con-name <c> ifname <ifname> ... mtu <n>`."""
    plan = _links(links_planned, host)
    assert plan["config"] == "networkmanager"
    assert plan["file"] == ""
    assert [(c["ifname"], c["type"], c["mtu"], c["autoconnect"]) for c in plan["connections"]] == [
        ("ib0", "infiniband", 4092, True),
        ("ib1", "infiniband", 4092, True),
    ]
    # The fabric carries no addresses of gpuready's: the link only comes up.
    assert {(c["method4"], c["method6"]) for c in plan["connections"]} == {("disabled", "disabled")}


def test_roce_ports_keep_their_ip_addressing(roce_planned: Any) -> None:
    """RoCE is RDMA over Ethernet and IP (RoCEv2 over UDP/IP): its GIDs come from the port's addresses, so the
    connection must not disable IPv4 or IPv6; NetworkManager's own methods stay (nothing set by gpuready)."""
    plan = _links(roce_planned, "rhel-9")
    assert [(c["ifname"], c["type"]) for c in plan["connections"]] == [("ib0", "ethernet"), ("ib1", "ethernet")]
    assert {(c["method4"], c["method6"]) for c in plan["connections"]} == {(None, None)}


@pytest.mark.parametrize("host", ["ubuntu-22.04", "ubuntu-24.04"])
def test_ubuntu_keeps_fabric_ports_up_with_netplan(links_planned: Any, host: str) -> None:
    """Canonical's netplan YAML reference: `network: {version: 2, ethernets: {<name>: {mtu, optional}}}`; files
    in /etc/netplan/*.yaml; IPoIB interfaces are `ethernets` too (netplan pull request 283, infiniband-mode)."""
    plan = _links(links_planned, host)
    assert plan["config"] == "netplan"
    assert plan["file"].startswith("/etc/netplan/") and plan["file"].endswith(".yaml")
    assert yaml.safe_load(plan["content"]) == {
        "network": {
            "version": 2,
            "ethernets": {"ib0": {"optional": True, "mtu": 4092}, "ib1": {"optional": True, "mtu": 4092}},
        }
    }
    assert plan["connections"] == []


def test_the_link_finding_says_what_keeps_the_ports_up(links_planned: Any) -> None:
    finding = next(c for c in links_planned.hosts["ubuntu-24.04"].checks if c.id == "fabric.links")
    assert finding.status == "skipped"
    assert finding.message == "plan only: ib0, ib1 up at boot, MTU 4092 through /etc/netplan/60-gpuready-fabric.yaml"


def _plan(planned: Any, host: str) -> dict[str, Any]:
    result = planned.hosts[host]
    assert result.failures == 0 and not result.unreachable, result.failed_tasks
    return json.loads(next(c for c in result.checks if c.id == "driver.plan").evidence)


@pytest.mark.parametrize("host", sorted(ref.FABRIC_MANAGER))
def test_nvswitch_systems_get_fabric_manager_of_the_drivers_branch_and_version(planned: Any, host: str) -> None:
    plan = _plan(planned, host)
    want = ref.FABRIC_MANAGER[host]
    assert plan["packages"] == want["packages"]
    assert plan["fabric_manager"]["package"] == want["package"]
    assert plan["fabric_manager"]["service"] == "nvidia-fabricmanager"
    assert plan["fabric_manager"]["nvlink5"] is (want["class"] == "hgx-b200")


@pytest.mark.parametrize("host", sorted(ref.IMEX))
def test_nvlink_domain_trays_get_imex_of_the_drivers_branch_and_version(planned: Any, host: str) -> None:
    plan = _plan(planned, host)
    want = ref.IMEX[host]
    assert plan["packages"] == want["packages"]
    assert plan["imex"]["service"] == "nvidia-imex"
    assert plan["imex"]["package"] == f"nvidia-imex-{want['pin'][0]}"
    assert plan["fabric_manager"] == {}


def test_a_node_class_outside_an_nvlink_domain_gets_no_imex(planned: Any) -> None:
    for host in [*ref.DRIVER, *ref.FABRIC_MANAGER]:
        plan = _plan(planned, host)
        assert plan["imex"] == {}
        assert not [p for p in plan["packages"] if p.startswith("nvidia-imex")]


def test_a_node_class_without_nvswitch_gets_no_fabric_manager(planned: Any) -> None:
    for host in ref.DRIVER:
        plan = _plan(planned, host)
        assert plan["fabric_manager"] == {}
        assert not [p for p in plan["packages"] if "fabricmanager" in p or p.startswith("nvlink5") or p.endswith("/fm")]


@pytest.mark.parametrize("host", sorted(ref.SECURE_BOOT))
def test_secure_boot_takes_signed_modules_where_the_distribution_signs_them(planned: Any, host: str) -> None:
    plan = _plan(planned, host)
    want = ref.SECURE_BOOT[host]
    assert plan["secure_boot"] is True
    assert plan["signed_modules"] is host.startswith("ubuntu")
    assert plan["packages"] == want["packages"]
    assert plan["headers"] == want["headers"]
    assert plan["running_kernel_modules"] == want.get("running_kernel_modules", [])


@pytest.mark.parametrize("host", ["ubuntu-22.04", "ubuntu-24.04"])
def test_canonicals_netplan_generator_reads_the_fabric_file(links_planned: Any, host: str, tmp_path: Path) -> None:
    """netplan's own generator turns the file into systemd-networkd links with the MTU, boot not waiting."""
    program, why = netplan.generator()
    require(program, why)
    plan = _links(links_planned, host)
    target = tmp_path / plan["file"].lstrip("/")
    target.parent.mkdir(parents=True)
    target.write_text(plan["content"])
    target.chmod(0o600)
    rendered = netplan.generate(program, tmp_path)
    for netdev in ("ib0", "ib1"):
        network = rendered[f"10-netplan-{netdev}.network"]
        assert f"Name={netdev}" in network.splitlines()
        assert "MTUBytes=4092" in network.splitlines()
        assert "RequiredForOnline=no" in network.splitlines()  # netplan's `optional: true`


# Ubuntu's archive, read on the day (tests/fixtures/apt/SOURCES.md): what an Ubuntu plan may name.
ARCHIVE = json.loads((Path(__file__).parents[2] / "fixtures" / "apt" / "ubuntu-archive-nvidia.json").read_text())
PLANNED_RECORDS = {h: ref.HOSTS[h] for h in ref.DRIVER} | {
    h: e["facts"] for h, e in (ref.FABRIC_MANAGER | ref.SECURE_BOOT).items()
}
# Unedited x86_64 Ubuntu recordings only: the archive was read for amd64.
UBUNTU_X86_64 = sorted(
    h for h, (record, edit) in PLANNED_RECORDS.items() if record in ("ubuntu-22.04", "ubuntu-24.04-x86_64") and not edit
)


@pytest.mark.parametrize("host", UBUNTU_X86_64)
def test_every_package_an_ubuntu_plan_names_is_in_ubuntus_archive(planned: Any, host: str) -> None:
    """Names and pinned versions against the archive's own indexes: a plan for a package or version Ubuntu does not
    publish would fail in apt on every node. The running kernel's signed modules are the exception apt is asked
    about first (signed-modules.yml), so they may be missing, and then the plan must name them there."""
    plan = json.loads(next(c for c in planned.hosts[host].checks if c.id == "driver.plan").evidence)
    archive = ARCHIVE[{"22.04": "jammy", "24.04": "noble"}[plan["distribution"].split()[-1]]]
    requests = plan["packages"] + plan["headers"] + (plan["fabric_manager"] or {}).get("packages", [])
    missing, unpublished = [], []
    for request in requests:
        name, _, version = request.partition("=")
        if name not in archive:
            missing.append(name)
        elif version and not any(fnmatchcase(v, version) for v in archive[name]):
            unpublished.append(f"{request} (the archive has {', '.join(archive[name])})")
    assert not unpublished
    assert not set(missing) - set(plan["running_kernel_modules"]), missing


def test_ubuntu_22_04_kernel_5_15_0_204_secure_boot_branch_580_plans_an_install(planned: Any, tmp_path: Path) -> None:
    """The scenario end to end: the plan's every package is in Ubuntu's archive for jammy, the running kernel's signed
    modules included, and the role's own refusal task, given what apt answered on that kernel (recorded), lets it
    through."""
    plan = _plan(planned, "ubuntu-22.04-secure-boot-580")
    assert plan["signed_modules"] is True
    archive = ARCHIVE["jammy"]
    assert [p for p in plan["packages"] if p not in archive] == []
    assert plan["running_kernel_modules"] == ["linux-modules-nvidia-580-server-5.15.0-204-generic"]
    recorded = Path(__file__).parents[2] / "fixtures" / "apt" / "jammy-signed-modules.txt"
    apt = f"lookup('ansible.builtin.file', {str(recorded)!r}) | gpuready.gpu.apt_state"
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "vars": {"nvidia_driver_kernel_release": "5.15.0-204-generic", "nvidia_driver_plan": plan},
            "tasks": [
                {
                    "ansible.builtin.set_fact": {
                        "nvidia_driver_apt": f"{{{{ {apt} }}}}",
                        "nvidia_driver_installed_packages": f"{{{{ ({apt}).packages }}}}",
                    }
                },
                {
                    "ansible.builtin.import_tasks": str(
                        collection_dir() / "roles/nvidia_driver/tasks/signed-modules.yml"
                    )
                },
            ],
        }
    ]
    done = run_local_play(tmp_path, play)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Refuse a branch Ubuntu builds no signed modules" in done.stdout
    assert "skipping: [localhost]" in done.stdout


def test_current_branches_plan_without_the_end_of_life_allowance(planned: Any) -> None:
    for host in sorted(ref.CURRENT & set(ref.DRIVER)):
        assert planned.hosts[host].failures == 0, planned.hosts[host].failed_tasks
