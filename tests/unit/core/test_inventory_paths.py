"""Path settings are resolved once, relative to the inventory folder, whatever the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuready.core import inventory


def _inventory(site: Path) -> Path:
    inv = site / "gpuready-lab" / "inv"
    (inv / "group_vars" / "all").mkdir(parents=True)
    (inv / "certs").mkdir()
    (inv / "certs" / "ca.pem").write_text("not checked here\n")
    (inv / "hosts.yml").write_text(yaml.safe_dump({"vcenter": {"hosts": {"vc": None}}}))
    (inv / "group_vars" / "all" / "gpuready.yml").write_text(
        yaml.safe_dump(
            {
                "gpuready": {
                    "node_classes": {"v100": {"gpu_model": "x", "gpu_count": 1}},
                    "driver": {"branch": "580"},
                    "vsphere": {"user": "u", "ca_file": "certs/ca.pem"},
                    "kubernetes": {"kubeconfig": "certs/../kubeconfig"},
                }
            }
        )
    )
    return inv


@pytest.mark.parametrize("how", ["relative", "absolute", "relative from elsewhere"])
def test_path_settings_are_absolute_and_relative_to_the_inventory(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inv = _inventory(tmp_path / "site")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "relative":
        monkeypatch.chdir(tmp_path / "site")
        loaded = inventory.load("gpuready-lab/inv")
    elif how == "absolute":
        monkeypatch.chdir(elsewhere)
        loaded = inventory.load(inv)
    else:
        monkeypatch.chdir(elsewhere)
        loaded = inventory.load("../site/gpuready-lab/inv")
    monkeypatch.chdir(elsewhere)  # where ansible-runner's modules run is not where gpuready started
    ca = Path(loaded.settings.vsphere.ca_file)
    assert ca.is_absolute() and ca.is_file() and ca.samefile(inv / "certs" / "ca.pem")
    kubeconfig = Path(loaded.settings.kubernetes.kubeconfig)
    assert kubeconfig.is_absolute() and kubeconfig.parent.samefile(inv)


def test_an_absolute_or_home_path_setting_is_kept(tmp_path: Path) -> None:
    inv = _inventory(tmp_path)
    settings = inv / "group_vars" / "all" / "gpuready.yml"
    data = yaml.safe_load(settings.read_text())
    data["gpuready"]["vsphere"]["ca_file"] = "/etc/ssl/certs/ca-certificates.crt"
    data["gpuready"]["kubernetes"]["kubeconfig"] = "~/.kube/config"
    settings.write_text(yaml.safe_dump(data))
    loaded = inventory.load(inv)
    assert loaded.settings.vsphere.ca_file == "/etc/ssl/certs/ca-certificates.crt"
    assert loaded.settings.kubernetes.kubeconfig == str(Path("~/.kube/config").expanduser())
