"""docs/ARCHITECTURE.md names only paths that exist: its tree and every file or folder it quotes."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

DOC = ROOT / "docs" / "ARCHITECTURE.md"
#: What the page quotes as a file or folder: a name with a known suffix, or one ending in a slash.
PATH = re.compile(r"^[\w.<>-]+(/[\w.<>-]+)*(/|\.(py|ya?ml|md|toml|json|go|cfg|j2|sh))$")
#: Paths a run writes (artifact and lab folders), not files of the repository.
RUNTIME = ("gpuready-runs/", "gpuready-lab/", "./", "<")


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def _tree_entries(text: str) -> list[str]:
    """The first column of the layout tree: top-level entries, and the names indented under a folder."""
    block = text.split("The tree, top down", 1)[1].split("```", 2)[1]
    entries, folder = [], ""
    for line in block.splitlines():
        if not line.strip() or line.startswith(" " * 8):
            continue
        column = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        if line.startswith("  "):
            entries += [folder + name.strip() for name in column.split(",")]
        else:
            folder = column if column.endswith("/") else ""
            entries.append(column)
    return entries


def _quoted(text: str) -> list[str]:
    tokens = re.findall(r"`([^`\s]+)`", text)
    return [t for t in tokens if PATH.match(t) and not t.startswith(RUNTIME)]


def _exists(name: str, tracked: list[str]) -> bool:
    if (ROOT / name).exists() and any(t == name or t.startswith(name.rstrip("/") + "/") for t in tracked):
        return True
    # A name quoted beside its folder (`kwok.py` after `lab/kubernetes.py`) is found as the end of a path.
    bare = name.rstrip("/")
    return any(t.endswith("/" + bare) or f"/{bare}/" in t for t in tracked)


def test_every_path_in_the_tree_exists() -> None:
    tracked = _tracked()
    entries = _tree_entries(DOC.read_text())
    assert len(entries) > 20, entries
    missing = [e for e in entries if not ((ROOT / e).exists() and (e in tracked or _exists(e, tracked)))]
    assert not missing, f"docs/ARCHITECTURE.md's tree names paths that do not exist: {missing}"


def test_every_quoted_path_exists() -> None:
    tracked = _tracked()
    quoted = _quoted(DOC.read_text())
    assert "core/command.py" in quoted
    missing = sorted({q for q in quoted if not _exists(q, tracked)})
    assert not missing, f"docs/ARCHITECTURE.md quotes paths that do not exist: {missing}"


def test_a_stale_path_is_caught() -> None:
    tracked = _tracked()
    assert not _exists("validate/node/replay.py", tracked)
    assert not _exists("ansible.cfg", tracked)
    assert _tree_entries("The tree, top down\n```\ncore/   x\n  nowhere.py   y\n```\n")[-1] == "core/nowhere.py"
