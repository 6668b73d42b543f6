"""Where the shipped Ansible collection gpuready.gpu is: playbooks/ in a checkout, gpuready/playbooks in a wheel.

Its own module because both the runner (which hands it to Ansible) and role_defaults (which reads the roles'
defaults from it) need it, and neither may import the other."""

from __future__ import annotations

from pathlib import Path

from gpuready.core.errors import Unreachable


def collection_dir() -> Path:
    """The gpuready.gpu collection: playbooks/ in a checkout, gpuready/playbooks in an installed wheel."""
    from importlib.resources import files

    root = Path(str(files("gpuready.playbooks")))
    if not (root / "galaxy.yml").is_file():
        raise Unreachable(f"the gpuready.gpu collection is missing from {root}; reinstall gpuready")
    return root
