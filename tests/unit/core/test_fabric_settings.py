"""The fabric's MTU setting: one default (the fabric role's), bounded by what IPoIB allows."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from gpuready.core.settings.nodes import Fabric
from tests.conftest import ROOT


def test_a_class_without_an_mtu_gets_the_roles_default() -> None:
    defaults = yaml.safe_load((ROOT / "playbooks/roles/fabric/defaults/main.yml").read_text())
    assert Fabric().mtu == defaults["fabric_default_mtu"] == 0  # 0: the link keeps the MTU its driver set


def test_an_mtu_above_ipoib_connected_modes_65520_is_refused() -> None:
    # Red Hat, "Configuring InfiniBand and RDMA networks": connected-mode IPoIB MTU is 65520 bytes.
    assert Fabric(mtu=65520).mtu == 65520
    with pytest.raises(ValidationError, match="less than or equal to 65520"):
        Fabric(mtu=65521)
