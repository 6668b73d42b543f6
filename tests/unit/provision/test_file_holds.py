"""The file_holds filter says a file already holds exactly when the modules it lets a role skip would change nothing.

The oracle is Ansible's own modules: copy (content, mode, owner, group) and file (a directory's
mode) run in check mode on this machine against the same files that ansible.builtin.find read; the
filter must say "holds" exactly where they report no change. The roles read their files with one raw
command instead (the file_read_command and file_states filters): what it reads must be what find
reads, for every key file_holds compares.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import sys
from pathlib import Path

import pytest

from tests.conftest import ModuleTmp
from tests.unit.provision.local_play import collection_filter, run_local_play

file_holds = collection_filter("file_holds")
file_states = collection_filter("file_states")

WANTED = "# Written by gpuready.\nTypes: deb\nURIs: https://example.invalid/repo\n"


def _files(tmp: Path) -> None:
    def write(name: str, content: str, mode: int) -> None:
        (tmp / name).write_text(content)
        (tmp / name).chmod(mode)

    write("same.sources", WANTED, 0o644)
    write("other-content.sources", WANTED + "Suites: /\n", 0o644)
    write("other-mode.sources", WANTED, 0o600)
    (tmp / "link.sources").symlink_to(tmp / "same.sources")
    for name, mode in (("keyrings", 0o755), ("keyrings-mode", 0o700)):
        (tmp / name).mkdir()
        (tmp / name).chmod(mode)
    (tmp / "not-a-dir").write_text("")
    (tmp / "dangling.sources").symlink_to(tmp / "missing.sources")


COPIED = ["same.sources", "other-content.sources", "other-mode.sources", "missing.sources", "keyrings"]
DIRECTORIES = ["keyrings", "keyrings-mode", "missing-dir", "not-a-dir"]
READ_ONLY = ["link.sources", "dangling.sources"]
COMPARED = ("isreg", "isdir", "islnk", "mode", "pw_name", "gr_name", "checksum")


@pytest.fixture(scope="module")
def oracle(module_tmp: ModuleTmp) -> tuple[Path, dict]:
    tmp = module_tmp("holds")
    files = tmp / "files"
    files.mkdir()
    _files(files)
    owner, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    check = {"check_mode": True}
    play = [
        {
            "name": "What the modules would change",
            "hosts": "all",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable, "d": str(files)},
            "tasks": [
                {
                    "name": "Find",
                    "ansible.builtin.find": {"paths": [str(files)], "file_type": "any", "get_checksum": True},
                    "register": "found",
                },
                {
                    "name": "Read as the roles do",
                    "ansible.builtin.raw": "{{ paths | gpuready.gpu.file_read_command }}",
                    "vars": {"paths": [str(files / n) for n in sorted({*COPIED, *DIRECTORIES, *READ_ONLY})]},
                    "register": "read",
                    "changed_when": False,
                },
                {
                    "name": "Copy",
                    "ansible.builtin.copy": {
                        "dest": "{{ d }}/{{ item }}",
                        "content": WANTED,
                        "mode": "0644",
                        "owner": owner,
                        "group": group,
                    },
                    "loop": [*COPIED, "link.sources"],
                    "ignore_errors": True,
                    **check,
                    "register": "copied",
                },
                {
                    "name": "Directory",
                    "ansible.builtin.file": {"path": "{{ d }}/{{ item }}", "state": "directory", "mode": "0755"},
                    "loop": DIRECTORIES,
                    "ignore_errors": True,
                    **check,
                    "register": "made",
                },
                {
                    "name": "Save",
                    "ansible.builtin.copy": {
                        "content": "{{ {'files': found.files, 'copied': copied.results,"
                        " 'made': made.results, 'read': read.stdout} | to_json }}",
                        "dest": str(tmp / "out.json"),
                        "mode": "0644",
                    },
                },
            ],
        }
    ]
    done = run_local_play(tmp, play)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads((tmp / "out.json").read_text())
    out["owner"], out["group"] = owner, group
    return files, out


def _changes(results: list[dict]) -> dict[str, bool]:
    """A module that would change the file, or fails on it: either way its task must run."""
    return {r["item"]: bool(r.get("changed") or r.get("failed")) for r in results}


def test_holds_exactly_where_copy_would_change_nothing(oracle: tuple[Path, dict]) -> None:
    files, out = oracle
    holds = {
        name: file_holds(
            out["files"], str(files / name), content=WANTED, mode="0644", owner=out["owner"], group=out["group"]
        )
        for name in COPIED
    }
    assert holds == {name: not changed for name, changed in _changes(out["copied"]).items() if name in COPIED}
    assert holds["same.sources"] and not holds["other-content.sources"] and not holds["other-mode.sources"]


def test_a_link_never_holds_so_copy_decides(oracle: tuple[Path, dict]) -> None:
    files, out = oracle
    assert not file_holds(out["files"], str(files / "link.sources"), content=WANTED, mode="0644")


def test_a_directory_holds_exactly_where_file_would_change_nothing(oracle: tuple[Path, dict]) -> None:
    files, out = oracle
    holds = {name: file_holds(out["files"], str(files / name), mode="0755", directory=True) for name in DIRECTORIES}
    assert holds == {name: not changed for name, changed in _changes(out["made"]).items()}
    assert holds["keyrings"] and not holds["keyrings-mode"]


def test_bad_arguments_are_one_clear_error() -> None:
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="files list"):
        file_holds({"files": []}, "/etc/x")
    with pytest.raises(AnsibleFilterError, match="octal"):
        file_holds([], "/etc/x", mode="rw-r--r--")


def test_the_roles_raw_read_reads_what_find_reads(oracle: tuple[Path, dict]) -> None:
    files, out = oracle
    read = {f["path"]: {k: f.get(k) for k in COMPARED} for f in file_states(out["read"])}
    found = {f["path"]: {k: f.get(k) for k in COMPARED} for f in out["files"]}
    # find follows no link for its checksum either, and a missing path is in neither.
    assert read == {
        path: state for path, state in found.items() if Path(path).name in {*COPIED, *DIRECTORIES, *READ_ONLY}
    }
    assert read[str(files / "same.sources")]["checksum"] and read[str(files / "dangling.sources")]["islnk"]
    for name in COPIED:
        path = str(files / name)
        wanted = {"content": WANTED, "mode": "0644", "owner": out["owner"], "group": out["group"]}
        assert file_holds(file_states(out["read"]), path, **wanted) == file_holds(out["files"], path, **wanted)
    for name in DIRECTORIES:
        path = str(files / name)
        assert file_holds(file_states(out["read"]), path, mode="0755", directory=True) == file_holds(
            out["files"], path, mode="0755", directory=True
        )
