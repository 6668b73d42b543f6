"""The modules' shared folders are removed when their module passes and kept when it fails.

The slow tier's shared fixtures (Debian roots, venvs, labs) are hundreds of MB each: kept to the end
of the session they filled CI's disk. Run here through pytester: a module of its own, whose test
writes where its folder is, then the folder is looked for after the module ended."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

MODULE = """
import pytest

@pytest.fixture(scope="module")
def shared(module_tmp):
    folder = module_tmp("shared")
    (folder / "root.img").write_bytes(b"x" * 1024)
    return folder

def test_uses_the_folder(shared):
    with open({where!r}, "w") as out:
        out.write(str(shared))
    assert {outcome}
"""


def _folder_after(pytester: pytest.Pytester, outcome: str) -> tuple[Path, pytest.RunResult]:
    pytester.makeconftest("from tests.conftest import module_tmp  # noqa: F401\n")
    where = pytester.path / "where.txt"
    pytester.makepyfile(test_shared=MODULE.format(where=str(where), outcome=outcome))
    result = pytester.runpytest("-p", "no:cacheprovider")
    return Path(where.read_text()), result


def test_a_passed_module_leaves_no_folder(pytester: pytest.Pytester) -> None:
    folder, result = _folder_after(pytester, "True")
    result.assert_outcomes(passed=1)
    assert folder.name.startswith("shared")
    assert not folder.exists()


def test_a_failed_module_keeps_its_folder_to_read(pytester: pytest.Pytester) -> None:
    folder, result = _folder_after(pytester, "False")
    result.assert_outcomes(failed=1)
    assert (folder / "root.img").stat().st_size == 1024
