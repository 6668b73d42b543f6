r"""What NVIDIA's and the distributions' own documentation says a node must get, written from those documents.

This table is the oracle of the planning tests: it is written from the sources below, never from the
roles' variables, so a role that builds a name the vendor does not publish fails against it.

Sources (read for each row):
- [DIG] NVIDIA Driver Installation Guide (docs.nvidia.com/datacenter/tesla/driver-installation-guide),
  "Kernel Modules", table "Open GPU kernel module installation": RHEL/Rocky 8/9
  `dnf module enable nvidia-driver:<branch>-open`, the same row for "Red Hat Enterprise Linux 8/9, AlmaLinux 8/9,
  Oracle Linux 8/9, Amazon Linux 2023, Rocky Linux 8/9"; proprietary streams `<branch>-dkms`; pre-installation:
  EL8/9 enable CodeReady Builder (RHEL: codeready-builder-for-rhel-<major>-<arch>-rpms through
  subscription-manager; Rocky: powertools on 8, crb on 9) and EPEL for dkms; Debian: enable contrib.
- [DKMS] github.com/NVIDIA/yum-packaging-dkms-nvidia README: streams `latest-dkms`, `<branch>-dkms`;
  "Open GPU Kernel Modules streams available in 515 and newer: open-dkms and <branch>-open";
  "XXX-dkms is not available for RHEL7".
- [EL7] github.com/NVIDIA/yum-packaging-nvidia-driver guide-rhel7: EL7 has flavours, not streams; the DKMS
  flavour is latest-dkms (nvidia-driver-latest-dkms, nvidia-driver-latest-dkms-cuda, kmod-nvidia-latest-dkms).
- [CUDA] developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/ with arch x86_64 or sbsa
  (arm64 servers); signing keys 3bf863cc.pub (Debian/Ubuntu) and D42D0685.pub (RHEL).
- [FM] NVIDIA Fabric Manager user guide, "Installing Fabric Manager": Debian/Ubuntu-based
  `apt-get install -V nvidia-open-<driver-branch>` from the CUDA repository.
- [UBU] packages.ubuntu.com: nvidia-driver-550-server-open ("NVIDIA driver (open kernel) metapackage",
  source nvidia-graphics-drivers-550-server, depends on the -550-server libraries); nvidia-driver-<b>-server;
  nvidia-utils-<b>-server. Canonical Ubuntu Server docs, "NVIDIA drivers installation":
  `ubuntu-drivers install --gpgpu nvidia:<branch>-server` for servers.
- [FMA] github.com/NVIDIA/apt-packaging-fabric-manager: Debian/Ubuntu packages nvidia-fabricmanager-<branch>
  (version = driver version) and cuda-drivers-fabricmanager-<branch>; packages.ubuntu.com: nvidia-fabricmanager-<branch>
  (source fabric-manager-<branch>, multiverse) depends on nvidia-kernel-common-<branch>-server of its own version.
- [FMY] github.com/NVIDIA/yum-packaging-fabric-manager README: "The NvSwitch modularity profile (fm) installs all of
  the NVIDIA driver packages, as well as Fabric Manager and NSCQ: dnf module install nvidia-driver:${stream}/fm";
  fabricmanager.spec: Name nvidia-fabricmanager-%{branch}, Version = the driver version.
- [FMG] NVIDIA Fabric Manager user guide 2.x (NVLink 5, Blackwell: the NVLink subnet manager, package
  nvlink5-<branch>, from the CUDA repositories); NVIDIA, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel
  Modules" (2024): Blackwell runs only the open kernel modules.
- [SIG] Canonical Ubuntu Server docs, "NVIDIA drivers installation": with Secure Boot, the signed precompiled
  modules linux-modules-nvidia-${DRIVER_BRANCH}${SERVER}-${LINUX_FLAVOUR} (and -$(uname -r) for the running
  kernel) instead of DKMS; NVIDIA GPU Operator, "Precompiled and Canonical signed drivers": user space
  nvidia-utils-<branch>-server and nvidia-compute-utils-<branch>-server. packages.ubuntu.com lists e.g.
  linux-modules-nvidia-595-server-7.0.0-30-generic and linux-modules-nvidia-615-server-open-generic.
- [DIG580] NVIDIA Driver Installation Guide, "Kernel Modules": "All releases beyond driver version 570 will use these
  packaging conventions": RHEL/Rocky/Alma 8/9 `dnf module enable nvidia-driver:580-open` then `dnf install nvidia-open`;
  "Advanced Options", "Switching between Driver Module Flavors": `cuda-drivers` is the proprietary flavour's package.
- [DIG620] NVIDIA Driver Installation Guide, 620 edition: the stream's `fm` profile is there "for driver branches 615
  and earlier"; RHEL/Rocky/Alma 8/9 still enable `nvidia-driver:<branch>-open` (or `-dkms`) and install `nvidia-open`
  (or `cuda-drivers`) [DIG580], so a later NVSwitch node also names Fabric Manager's package,
  nvidia-fabricmanager-<branch> at the driver's version [FMY] spec.
- [OPEN] NVIDIA, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules" (2024): Grace Hopper and Blackwell
  must use the open kernel modules.
- [LIFE] NVIDIA Data Center Drivers, "Supported Drivers and CUDA Toolkit Versions" (R620 edition): R580 LTSB (June
  2028), R595 PB (March 2027), R620 LTSB (September 2029); New Feature Branches (590) have no end-of-life date; R570
  is no longer listed.
- [IMEX] NVIDIA IMEX guide ("NVIDIA IMEX Service for NVLink Networks"), "Getting Started with IMEX": the package
  "register[s] the service as a systemd service called nvidia-imex"; supported on NVIDIA GB200 NVL72; the service
  aborts when the loaded driver's version is not its own. Package names: packages.ubuntu.com, noble(-updates):
  nvidia-imex-550, -570, -575, -595 ("IMEX Manager for NVIDIA based systems", Canonical's apt-packaging-imex);
  RHEL 8: aws/aws-parallelcluster-cookbook, nvidia_imex partial _rhel.rb:
  "nvidia-imex-<driver major>-<driver version>" from NVIDIA's repository. IMEX is published for Ubuntu 22.04 and
  24.04 (jammy, noble), not 20.04.
- [DCGM] NVIDIA DCGM docs, "Install DCGM": configure NVIDIA's package repository (the CUDA network repository), then
  `apt-get install --install-recommends datacenter-gpu-manager-4-cuda<major>`; the Ubuntu archive has no DCGM
  package (tests/fixtures/apt/ubuntu-archive-nvidia.json holds none). [KEYRING] NVIDIA driver installation guide,
  "Ubuntu", network repository: `wget .../repos/<distro>/<arch>/cuda-keyring_1.1-1_all.deb; dpkg -i` it; the
  repository's Packages index (developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/Packages):
  "Package: cuda-keyring Version: 1.1-1 ... Filename: ./cuda-keyring_1.1-1_all.deb ... Enrolls public key: 3BF863CC
  (2024) and enables repo: ubuntu2404/x86_64". NVIDIA's Ubuntu directories are ubuntu2204 and ubuntu2404.
- [DIG10] NVIDIA Driver Installation Guide (595 and 620 editions), "Kernel Modules", table "Open GPU kernel module
  installation", row "Red Hat Enterprise Linux 10, AlmaLinux 10, Rocky Linux 10, Oracle Linux 10": the latest
  `dnf install nvidia-open`; a branch `dnf versionlock \*nvidia\*580\*` then `dnf install nvidia-open` (no module
  streams); "Advanced Options", "Switching between Driver Module Flavors", RHEL 10: `dnf install --allowerasing
  nvidia-open` (open), `cuda-drivers` (proprietary); "Version locking", DNF 4 (RHEL 10, Rocky 10): the plugin is
  python3-dnf-plugin-versionlock. Pre-installation on RHEL 10: EPEL, and `subscription-manager repos
  --enable=codeready-builder-for-rhel-10-$(uname -m)-rpms` (crb on the rebuilds). NVIDIA's cuda-rhel10.repo
  (developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/cuda-rhel10.repo, as public setup scripts reproduce
  it): baseurl .../rhel10/x86_64, gpgkey .../rhel10/x86_64/CDF6BA43.pub.
- [LOCK10] [DIG10]'s lock spec `*nvidia*<branch>*` misses `cuda-drivers` (no "nvidia" in the name): with RHEL's
  `best=True` a later `dnf upgrade` of a proprietary node then fails on the next branch's cuda-drivers, whose driver
  the lock excludes (shown by a real dnf 4 in test_el10_dnf.py); `cuda-drivers-<branch>.*` holds it too.
- [EPEL10] Fedora EPEL documentation, "EPEL 10": builds for RHEL 10.x "are published in pub/epel/10.x dnf repositories
  for consumption by the corresponding RHEL 10 minor version"; pub/epel/10 is CentOS Stream 10's (a link to the
  latest 10.x).
- [EL10F] The EL10 hosts' facts: a real recording (AlmaLinux 9.0, RHEL 8.5: tests/fixtures/facts/SOURCES.md) with the
  fields that name the release edited to a 10.0 release: distribution_version 10.0, major 10, the codename of its
  os-release (python-distro/distro tests/resources/distros: rhel10 "10.0 (Coughlan)", almalinux10 "10.0 (Purple
  Lion)", Apache-2.0) and the kernel RHEL 10.0 shipped, 6.12.0-55.9.1.el10_0.x86_64 (Red Hat's RHEL 10 documentation
  prints it for `uname -r`).
- [CTK] NVIDIA Container Toolkit install guide: apt list
  `deb https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /` (apt's $(ARCH) is dpkg's
  architecture: amd64, arm64); rpm repo `https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch`
  ($basearch: x86_64, aarch64); key https://nvidia.github.io/libnvidia-container/gpgkey.
"""

from __future__ import annotations

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
CTK = "https://nvidia.github.io/libnvidia-container/stable"
KEYS = {"apt": "3bf863cc.pub", "yum": "D42D0685.pub"}  # [CUDA]

# host name in the test inventory -> (recorded facts, one named field edit or None)
HOSTS: dict[str, tuple[str, dict[str, str] | None]] = {
    "rhel-7": ("rhel-7", None),
    "rhel-8": ("rhel-8", None),
    "rhel-8-open": ("rhel-8", None),
    "rhel-9": ("rhel-9", None),
    "rhel-9-open": ("rhel-9", None),
    "rocky-9-open": ("rocky-9", None),
    "alma-9-open": ("almalinux-9", None),
    "ubuntu-22.04": ("ubuntu-22.04", None),
    "ubuntu-22.04-server-open": ("ubuntu-22.04", None),
    # Ubuntu 24.04: the x86_64 recording taken here, and the public arm64 one.
    "ubuntu-24.04": ("ubuntu-24.04-x86_64", None),
    "ubuntu-24.04-open": ("ubuntu-24.04-x86_64", None),
    "ubuntu-24.04-arm64": ("ubuntu-24.04", None),
    "ubuntu-22.04-580": ("ubuntu-22.04", None),
    "rhel-9-580-open": ("rhel-9", None),
    "rocky-8-590": ("rhel-8", None),
    "ubuntu-24.04-gh200": ("ubuntu-24.04-x86_64", None),
}
# Rows that pin a branch NVIDIA has retired [LIFE] set nvidia_driver_allow_end_of_life; the current ones do not.
CURRENT = {"ubuntu-22.04-580", "rhel-9-580-open", "rocky-8-590", "ubuntu-24.04-gh200"}

# host -> (branch, version) pinned, then what the vendors say the node gets.
DRIVER: dict[str, dict] = {
    "rhel-7": {
        "pin": ("418", "418.40.04"),
        "repo": f"{CUDA}/rhel7/x86_64/",  # [CUDA]
        "stream": "",  # [EL7]: no module streams
        "packages": [  # [EL7]: the latest-dkms flavour, held at the pinned version
            "nvidia-driver-latest-dkms-418.40.04",
            "nvidia-driver-latest-dkms-cuda-418.40.04",
            "kmod-nvidia-latest-dkms-418.40.04",
        ],
        "crb": "",
        "epel": True,
    },
    "rhel-8": {
        "pin": ("470", "470.82.01"),
        "repo": f"{CUDA}/rhel8/x86_64/",
        "stream": "nvidia-driver:470-dkms",  # [DKMS]
        "packages": ["@nvidia-driver:470-dkms", "nvidia-driver-470.82.01"],
        "crb": "codeready-builder-for-rhel-8-x86_64-rpms",  # [DIG]
        "epel": True,
    },
    "rhel-8-open": {
        "pin": ("550-open", ""),
        "repo": f"{CUDA}/rhel8/x86_64/",
        "stream": "nvidia-driver:550-open",  # [DIG], [DKMS]
        "packages": ["@nvidia-driver:550-open"],
        "crb": "codeready-builder-for-rhel-8-x86_64-rpms",
        "epel": True,
    },
    "rhel-9": {
        "pin": ("550", ""),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:550-dkms",
        "packages": ["@nvidia-driver:550-dkms"],
        "crb": "codeready-builder-for-rhel-9-x86_64-rpms",
        "epel": True,
    },
    "rhel-9-open": {
        "pin": ("570-open", "570.86.15"),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:570-open",
        "packages": ["@nvidia-driver:570-open", "nvidia-driver-570.86.15"],
        "crb": "codeready-builder-for-rhel-9-x86_64-rpms",
        "epel": True,
    },
    "rocky-9-open": {
        "pin": ("535-open", ""),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:535-open",
        "packages": ["@nvidia-driver:535-open"],
        "crb": "crb",  # [DIG]: Rocky 9 `dnf config-manager --set-enabled crb`
        "epel": True,
    },
    "alma-9-open": {  # [DIG]: AlmaLinux 9 shares RHEL 9's row and repository; its CRB is crb, as Rocky's
        "pin": ("570-open", ""),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:570-open",
        "packages": ["@nvidia-driver:570-open"],
        "crb": "crb",
        "epel": True,
    },
    "ubuntu-22.04": {
        "pin": ("535", ""),
        "repo": "",  # the Ubuntu archive [UBU]
        "stream": "",
        "packages": ["nvidia-driver-535-server", "nvidia-utils-535-server"],
        "crb": "",
        "epel": False,
    },
    "ubuntu-22.04-server-open": {
        "pin": ("550-server-open", ""),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-550-server-open", "nvidia-utils-550-server"],  # [UBU]
        "crb": "",
        "epel": False,
    },
    "ubuntu-24.04": {
        # A version Ubuntu publishes for noble (noble-updates; tests/fixtures/apt/ubuntu-archive-nvidia.json).
        "pin": ("550-server", "550.163.01"),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-550-server=550.163.01-*", "nvidia-utils-550-server=550.163.01-*"],
        "crb": "",
        "epel": False,
    },
    "ubuntu-24.04-open": {
        "pin": ("570-open", ""),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-570-server-open", "nvidia-utils-570-server"],
        "crb": "",
        "epel": False,
    },
    "ubuntu-22.04-580": {  # the branch the measured H100 runs (580.159.04)
        "pin": ("580", ""),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-580-server", "nvidia-utils-580-server"],  # [UBU]
        "crb": "",
        "epel": False,
    },
    "rhel-9-580-open": {
        "pin": ("580-open", ""),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:580-open",  # [DIG580]
        "packages": ["nvidia-open"],  # [DIG580]: `dnf install nvidia-open` once the stream is enabled
        "crb": "codeready-builder-for-rhel-9-x86_64-rpms",
        "epel": True,
    },
    "rocky-8-590": {  # the rhel-8 recording: a New Feature Branch, proprietary modules
        "pin": ("590", ""),
        "repo": f"{CUDA}/rhel8/x86_64/",
        "stream": "nvidia-driver:590-dkms",
        "packages": ["cuda-drivers"],  # [DIG580]
        "crb": "codeready-builder-for-rhel-8-x86_64-rpms",
        "epel": True,
    },
    "ubuntu-24.04-gh200": {  # node class gh200: a plain branch takes the open modules [OPEN]
        "pin": ("580", ""),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-580-server-open", "nvidia-utils-580-server"],
        "crb": "",
        "epel": False,
    },
    "ubuntu-24.04-arm64": {
        "pin": ("550", ""),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-550-server", "nvidia-utils-550-server"],
        "crb": "",
        "epel": False,
    },
}

# host -> (branch pinned, what the refusal must say): flavours no vendor publishes.
REFUSED: dict[str, tuple[str, str]] = {
    # [DIG], [DKMS]: NVIDIA's RHEL streams are <branch>-dkms and <branch>-open; "-server" is Canonical's naming.
    "rhel-9-server": ("550-server", "the -server packages exist only in the Ubuntu archive"),
    # [DKMS]: open streams from 515 on.
    "rhel-8-old-open": ("470-open", "open kernel module packages start at branch 515"),
    # [LIFE]: without nvidia_driver_allow_end_of_life.
    "ubuntu-22.04-570": ("570", "driver branch 570 has reached its end of life"),
}
HOSTS |= {
    "rhel-9-server": ("rhel-9", None),
    "rhel-8-old-open": ("rhel-8", None),
    "ubuntu-22.04-570": ("ubuntu-22.04", None),
}
# Enterprise Linux 10 [DIG10]: no module stream; the request names the branch (every branch has the same package
# names) and dnf's version lock holds it; rhel10 is signed with its own key; EPEL of the 10.x minor [EPEL10].
EL10_KERNEL = "6.12.0-55.9.1.el10_0.x86_64"  # [EL10F]
EL10_FACTS = {
    "rhel-10": (
        "rhel-8",
        {
            "distribution_version": "10.0",
            "distribution_major_version": "10",
            "distribution_release": "Coughlan",
            "kernel": EL10_KERNEL,
        },
    ),
    "alma-10": (
        "almalinux-9",
        {
            "distribution_version": "10.0",
            "distribution_major_version": "10",
            "distribution_release": "Purple Lion",
            "kernel": EL10_KERNEL,
        },
    ),
}
RHEL10_KEY = "CDF6BA43.pub"
# What every EL10 row shares: the rhel10 repository and key, no stream, the branch's locks, EPEL of 10.0.
EL10_ROW = {
    "repo": f"{CUDA}/rhel10/x86_64/",
    "key": RHEL10_KEY,
    "stream": "",
    "lock": ["*nvidia*580*", "cuda-drivers-580.*"],  # [DIG10]; cuda-drivers [LOCK10]
    "epel": True,
    "epel_url": "https://dl.fedoraproject.org/pub/epel/10.0/Everything/x86_64/",  # [EPEL10]
}
DRIVER |= {
    "rhel-10-580-open": EL10_ROW
    | {
        "pin": ("580-open", ""),
        "packages": ["nvidia-open-580.*"],
        "crb": "codeready-builder-for-rhel-10-x86_64-rpms",
    },
    "alma-10-580": EL10_ROW | {"pin": ("580", ""), "packages": ["cuda-drivers-580.*"], "crb": "crb"},
    # A version of the branch (580.126.20: Ubuntu's fabric-manager-580 of that version).
    "alma-10-580-pinned": EL10_ROW
    | {"pin": ("580-open", "580.126.20"), "packages": ["nvidia-open-580.126.20"], "crb": "crb"},
}
HOSTS |= {
    "rhel-10-580-open": EL10_FACTS["rhel-10"],
    "alma-10-580": EL10_FACTS["alma-10"],
    "alma-10-580-pinned": EL10_FACTS["alma-10"],
}
CURRENT |= {"rhel-10-580-open", "alma-10-580", "alma-10-580-pinned"}
# EL 8/9 take EPEL by major release [DIG].
DRIVER["rhel-9-580-open"]["epel_url"] = "https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/"

CURRENT |= {"ubuntu-22.04-570", "rhel-9-b200-plain-580", "ubuntu-22.04-secure-boot-580"}
CURRENT |= {"rhel-9-hgx-620", "rocky-8-hgx-620", "rhel-9-hgx-615"}

# host -> the Container Toolkit repository [CTK].
TOOLKIT_REPO: dict[str, str] = {
    "rhel-8": f"{CTK}/rpm/x86_64/",
    "rhel-9": f"{CTK}/rpm/x86_64/",
    "rocky-9-open": f"{CTK}/rpm/x86_64/",
    "alma-9-open": f"{CTK}/rpm/x86_64/",
    "ubuntu-22.04": f"{CTK}/deb/amd64/",
    "ubuntu-24.04": f"{CTK}/deb/amd64/",
    "ubuntu-24.04-arm64": f"{CTK}/deb/arm64/",
}
# The CUDA repository of an arm64 server uses NVIDIA's "sbsa" directory [CUDA]; Ubuntu itself needs none.
CUDA_ARCH = {"x86_64": "x86_64", "aarch64": "sbsa"}

# Node classes of the NVSwitch hosts below; gpu_model as nvidia-smi prints it.
NODE_CLASSES: dict[str, dict] = {
    "hgx-h100": {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "nvswitch": True},
    "hgx-b200": {"gpu_count": 8, "gpu_model": "NVIDIA B200", "nvswitch": True},
    "gh200": {"gpu_count": 1, "gpu_model": "NVIDIA GH200 480GB"},
    # A GB200 NVL72 compute tray: 4 GPUs, no NVSwitch of its own (the rack's switch trays hold them), one NVLink domain.
    "gb200-nvl72": {"gpu_count": 4, "gpu_model": "NVIDIA GB200", "nvlink_domain": True},
}
NODE_CLASS = {"ubuntu-24.04-gh200": "gh200"}
# The Ubuntu 24.04 recording made into Debian 12 (os_family stays Debian): the fields that name the release.
DEBIAN_12 = {
    "distribution": "Debian",
    "distribution_version": "12.7",
    "distribution_major_version": "12",
    "distribution_release": "bookworm",
}

# host -> (recorded facts, node class, (branch, version)) and what NVSwitch systems get.
FABRIC_MANAGER: dict[str, dict] = {
    "rhel-9-hgx": {
        "facts": ("rhel-9", None),
        "class": "hgx-h100",
        "pin": ("550", ""),
        "packages": ["@nvidia-driver:550-dkms/fm"],  # [FMY]: the profile brings Fabric Manager
        "package": "nvidia-fabricmanager-550",  # [FMY] spec
    },
    "rhel-8-hgx-pinned": {
        "facts": ("rhel-8", None),
        "class": "hgx-h100",
        "pin": ("535-open", "535.161.08"),
        # [FMY]: stream/fm; the pinned version names both the driver and Fabric Manager at that version.
        "packages": ["@nvidia-driver:535-open/fm", "nvidia-driver-535.161.08", "nvidia-fabricmanager-535-535.161.08"],
        "package": "nvidia-fabricmanager-535",
    },
    "rhel-7-hgx": {
        "facts": ("rhel-7", None),
        "class": "hgx-h100",
        "pin": ("470", "470.82.01"),
        "packages": [
            "nvidia-driver-latest-dkms-470.82.01",
            "nvidia-driver-latest-dkms-cuda-470.82.01",
            "kmod-nvidia-latest-dkms-470.82.01",
            "nvidia-fabricmanager-470-470.82.01",  # [FMY] spec: name-branch, version = driver version
        ],
        "package": "nvidia-fabricmanager-470",
    },
    "ubuntu-22.04-hgx": {
        "facts": ("ubuntu-22.04", None),
        "class": "hgx-h100",
        "pin": ("535", ""),
        "packages": ["nvidia-driver-535-server", "nvidia-utils-535-server", "nvidia-fabricmanager-535"],  # [FMA]
        "package": "nvidia-fabricmanager-535",
    },
    "ubuntu-24.04-hgx-pinned": {
        "facts": ("ubuntu-24.04-x86_64", None),
        "class": "hgx-h100",
        "pin": ("550-server", "550.163.01"),
        "packages": [
            "nvidia-driver-550-server=550.163.01-*",
            "nvidia-utils-550-server=550.163.01-*",
            "nvidia-fabricmanager-550=550.163.01-*",
        ],
        "package": "nvidia-fabricmanager-550",
    },
    "debian-12-b200": {
        "facts": ("ubuntu-24.04-x86_64", DEBIAN_12),
        "class": "hgx-b200",
        "pin": ("570-open", ""),
        # [FM] open modules, [FMA] Fabric Manager, [FMG] the NVLink subnet manager for NVLink 5.
        "packages": ["nvidia-open-570", "nvidia-driver", "nvidia-fabricmanager-570", "nvlink5-570"],
        "package": "nvidia-fabricmanager-570",
    },
    "rhel-9-b200": {
        "facts": ("rhel-9", None),
        "class": "hgx-b200",
        "pin": ("570-open", ""),
        "packages": ["@nvidia-driver:570-open/fm", "nvlink5-570"],  # [FMY], [FMG]
        "package": "nvidia-fabricmanager-570",
    },
    "rhel-9-b200-plain-580": {
        "facts": ("rhel-9", None),
        "class": "hgx-b200",
        # A plain branch on Blackwell: the open modules [OPEN]; the fm profile brings Fabric Manager [FMY].
        "pin": ("580", ""),
        "packages": ["@nvidia-driver:580-open/fm", "nvlink5-580"],
        "package": "nvidia-fabricmanager-580",
    },
    # [DIG620]: no fm profile after 615: the stream's meta package and Fabric Manager's own package.
    "rhel-9-hgx-620": {
        "facts": ("rhel-9", None),
        "class": "hgx-h100",
        "pin": ("620-open", ""),
        "packages": ["nvidia-open", "nvidia-fabricmanager-620"],
        "package": "nvidia-fabricmanager-620",
    },
    "rocky-8-hgx-620": {
        "facts": ("rhel-8", None),
        "class": "hgx-h100",
        "pin": ("620", ""),
        "packages": ["cuda-drivers", "nvidia-fabricmanager-620"],
        "package": "nvidia-fabricmanager-620",
    },
    # The last branch with the profile keeps it [DIG620].
    "rhel-9-hgx-615": {
        "facts": ("rhel-9", None),
        "class": "hgx-h100",
        "pin": ("615-open", ""),
        "packages": ["@nvidia-driver:615-open/fm"],
        "package": "nvidia-fabricmanager-615",
    },
}

# host -> (recorded facts, (branch, version), packages) of GB200 NVL compute trays: the open modules [OPEN] and the
# IMEX service of the driver's branch at its version [IMEX]; no Fabric Manager (no NVSwitch in the tray).
IMEX: dict[str, dict] = {
    "ubuntu-24.04-gb200": {
        "facts": ("ubuntu-24.04", None),  # the arm64 recording: Grace is arm64
        "pin": ("595", ""),
        "packages": ["nvidia-driver-595-server-open", "nvidia-utils-595-server", "nvidia-imex-595"],
    },
    "rhel-9-gb200-pinned": {
        # The RHEL 9 recording on Grace: one named edit, the architecture.
        "facts": ("rhel-9", {"architecture": "aarch64"}),
        # The version of the recorded GB200 (tests/fixtures/gpu: gb200-x4-arm64-580.173.02-v13.xml).
        "pin": ("580", "580.173.02"),
        "packages": ["nvidia-open", "nvidia-driver-580.173.02", "nvidia-imex-580-580.173.02"],
    },
}
CURRENT |= set(IMEX) | {"ubuntu-20.04-gb200"}

# host -> (recorded facts, node class, branch, what the refusal must say) for NVLink 5 systems no package serves.
FABRIC_REFUSED: dict[str, tuple[tuple[str, dict | None], str, str, str]] = {
    "ubuntu-24.04-b200": (
        ("ubuntu-24.04-x86_64", None),
        "hgx-b200",
        "570-open",
        "NVIDIA publishes nvlink5-570 (NVLink subnet manager) in its CUDA repositories",
    ),
    # [IMEX]: no IMEX package for Ubuntu 20.04.
    "ubuntu-20.04-gb200": (("ubuntu-20.04", None), "gb200-nvl72", "595", "NVIDIA's IMEX service (nvidia-imex-595)"),
    # [DIG10], [FMY]: on EL 8/9 Fabric Manager comes with the module stream's fm profile; no source here names the
    # package of the rhel10 repository, which has no streams.
    "alma-10-hgx": (
        EL10_FACTS["alma-10"],
        "hgx-h100",
        "580",
        "node class hgx-h100 has NVSwitches: gpuready has no record of the Fabric Manager package",
    ),
    "rhel-10-gb200": (EL10_FACTS["rhel-10"], "gb200-nvl72", "580", "NVIDIA's IMEX service (nvidia-imex-580)"),
}
CURRENT |= {"alma-10-hgx", "rhel-10-gb200"}

# host -> (recorded facts, (branch, version), packages, headers) with Secure Boot on.
SECURE_BOOT: dict[str, dict] = {
    "ubuntu-22.04-secure-boot": {
        "facts": ("ubuntu-22.04", None),
        "pin": ("535", ""),
        # [SIG]: the flavour's signed modules (follows kernel updates) and the running kernel's (the recording's,
        # 5.15.0-204-generic).
        "packages": [
            "linux-modules-nvidia-535-server-generic",
            "linux-modules-nvidia-535-server-5.15.0-204-generic",
            "nvidia-utils-535-server",
            "nvidia-compute-utils-535-server",
        ],
        # apt is asked whether Ubuntu builds this one at all (on 5.15.0-204 it does not: tests/fixtures/apt).
        "running_kernel_modules": ["linux-modules-nvidia-535-server-5.15.0-204-generic"],
        "headers": [],  # nothing is built on the node
    },
    "ubuntu-24.04-secure-boot-open": {
        "facts": ("ubuntu-24.04-x86_64", None),
        "pin": ("570-open", ""),
        "packages": [
            "linux-modules-nvidia-570-server-open-generic",
            "linux-modules-nvidia-570-server-open-6.8.0-151-generic",  # the recording's running kernel
            "nvidia-utils-570-server",
            "nvidia-compute-utils-570-server",
        ],
        "running_kernel_modules": ["linux-modules-nvidia-570-server-open-6.8.0-151-generic"],
        "headers": [],
    },
    # The scenario: Ubuntu 22.04, kernel 5.15.0-204, Secure Boot on, branch 580. Canonical signs 580-server modules
    # for that kernel (tests/fixtures/apt): the plan names them and installs.
    "ubuntu-22.04-secure-boot-580": {
        "facts": ("ubuntu-22.04", None),
        "pin": ("580", ""),
        "packages": [
            "linux-modules-nvidia-580-server-generic",
            "linux-modules-nvidia-580-server-5.15.0-204-generic",
            "nvidia-utils-580-server",
            "nvidia-compute-utils-580-server",
        ],
        "running_kernel_modules": ["linux-modules-nvidia-580-server-5.15.0-204-generic"],
        "headers": [],
    },
    # RHEL: NVIDIA's DKMS streams stay; the DKMS key must be enrolled as a MOK (the driver role checks it).
    "rhel-9-secure-boot": {
        "facts": ("rhel-9", None),
        "pin": ("550", ""),
        "packages": ["@nvidia-driver:550-dkms"],  # [DKMS]
        "headers": ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64", "kernel-headers-5.14.0-427.13.1.el9_4.x86_64"],
    },
}

# recorded facts -> the cuda-keyring package NVIDIA's DCGM install needs there [DCGM], [KEYRING], [CUDA]; "" where the
# driver role's own CUDA repository serves DCGM (RHEL family, Debian).
DCGM_KEYRING: dict[str, str] = {
    "ubuntu-22.04": f"{CUDA}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb",
    "ubuntu-24.04-x86_64": f"{CUDA}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb",
    "ubuntu-24.04": f"{CUDA}/ubuntu2404/sbsa/cuda-keyring_1.1-1_all.deb",  # the arm64 recording
    "rhel-9": "",
    "rocky-9": "",
}
