"""``gpuready inventory init``: the example inventories written out, as shipped, and never over a user's."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT, gpuready


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.yml"))}


def test_init_writes_every_example_inventory_as_shipped_and_they_check(tmp_path: Path) -> None:
    done = gpuready("inventory", "init", "examples", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shipped = sorted(p.name for p in (ROOT / "inventories").iterdir() if (p / "hosts.yml").is_file())
    assert len(shipped) >= 4
    assert done.stdout.split() == [f"examples/{n}" for n in shipped]
    assert done.stderr.strip() == "next: gpuready inventory check -i examples/local"
    assert _files(tmp_path / "examples") == _files(ROOT / "inventories")
    checked = gpuready("inventory", "check", "-i", "examples/local", "--artifacts", "runs", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The local inventory has one host; the checks on the inventory folder itself count as none.
    assert checked.stdout.splitlines()[0] == "inventory check: PASSED · 1 host", checked.stdout
    # The inventory folder's own checks are no host: only the machine is listed.
    assert "passed: localhost" in checked.stdout.splitlines(), checked.stdout


def test_init_defaults_to_inventories_and_only_writes_what_is_asked(tmp_path: Path) -> None:
    done = gpuready("inventory", "init", "--only", "local", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["inventories/local"]
    assert [p.name for p in (tmp_path / "inventories").iterdir()] == ["local"]


def test_init_keeps_an_inventory_already_there_writes_the_rest_and_refuses_unknown_names_in_one_line(
    tmp_path: Path,
) -> None:
    edited = tmp_path / "inventories" / "local" / "hosts.yml"
    edited.parent.mkdir(parents=True)
    edited.write_text("# mine\n")
    done = gpuready("inventory", "init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "inventories/local" in done.stdout.split()
    assert done.stderr.splitlines() == [
        "inventories/local is already there: kept as it is",
        "next: gpuready inventory check -i inventories/local",
    ]
    assert edited.read_text() == "# mine\n" and (tmp_path / "inventories" / "baremetal-c4140" / "hosts.yml").is_file()
    done = gpuready("inventory", "init", "--only", "local,nope", "elsewhere", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "unknown example inventory nope (known: baremetal-c4140, local," in done.stderr


def test_the_tours_first_command_works_in_the_checkout_where_the_examples_are_the_shipped_ones() -> None:
    """The README's tour starts with `gpuready inventory init`; run in a clone, where ./inventories holds the
    examples themselves, it keeps them and says the next step."""
    before = _files(ROOT / "inventories")
    done = gpuready("inventory", "init", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == sorted(
        f"inventories/{p.parent.name}" for p in (ROOT / "inventories").glob("*/hosts.yml")
    )
    assert done.stderr.splitlines()[-1] == "next: gpuready inventory check -i inventories/local"
    assert "already there: kept as they are" in done.stderr
    assert _files(ROOT / "inventories") == before
