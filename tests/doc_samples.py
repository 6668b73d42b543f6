"""Console samples of the docs that a test compares, because running their commands needs a set-up only that
test makes (a stand-in play, sbatch with no Slurm cluster, a vCenter made wrong on purpose).

The marker before such a block names the test that owns it, and the page says what the set-up was:

    <!-- compared by tests/integration/provision/test_diff.py::test_diff_prints_each_change... -->
    ```console
    $ gpuready provision cluster -i inv --check --diff
    ...
    ```

The owner finds its block with ``owned_block(page)``, runs the block's commands with record-doc-samples' own
runner (one shell session, 80 columns) and compares with that script's normalisation (run folders, times,
temporary paths, ports); a block that no longer matches fails the owner with a diff, or, with
``GPUREADY_RECORD_DOC_SAMPLES=1`` in the environment, is rewritten with what the commands print now (an
excerpt is edited by hand).
"""

from __future__ import annotations

import difflib
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


def _load_recording_script() -> ModuleType:
    name = "record_doc_samples"
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.machinery.SourceFileLoader(name, str(ROOT / "scripts" / "record-doc-samples"))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    loader.exec_module(module)
    return module


recording = _load_recording_script()
#: Set to 1, the owners rewrite their blocks with what the commands print now instead of failing.
RECORD = "GPUREADY_RECORD_DOC_SAMPLES"

MARKER = re.compile(
    r"^<!-- compared by (?P<owner>tests/[\w/]+\.py::\w+) -->\n```[a-z]*\n(?P<body>.*?)^```$", re.M | re.S
)


def running_test() -> str:
    """``path::function`` of the test that runs now, without its parameters."""
    node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    return re.sub(r"\[.*\]$", "", node)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    owner: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page}:{self.line}"

    @property
    def commands(self) -> list[str]:
        return recording.commands(self.body)

    @property
    def lines(self) -> list[str]:
        return recording.normalised(self.body).splitlines()

    def run(self, cwd: Path) -> list[subprocess.CompletedProcess[str]]:
        """The block's commands as record-doc-samples runs a sample's: in order, in one shell session in ``cwd``."""
        return [recording.shell(command, cwd) for command in self.commands]

    def assert_printed(self, done: list[subprocess.CompletedProcess[str]], *, excerpt: bool = False) -> None:
        """The block is what its commands printed; with ``excerpt``, each command's lines in the block are
        consecutive lines of what it printed."""
        now = "".join(
            f"$ {command}\n{recording.tidy(d.stdout)}" for command, d in zip(self.commands, done, strict=True)
        )
        if excerpt:
            shown, printed = _per_command(self.body), _per_command(now)
            if all(
                _within(recording.normalised(a), recording.normalised(b)) for a, b in zip(shown, printed, strict=True)
            ):
                return
        elif recording.normalised(self.body) == recording.normalised(now):
            return
        if os.environ.get(RECORD) == "1" and not excerpt:
            self._rewrite(now)
            return
        diff = difflib.unified_diff(
            self.body.splitlines(), now.splitlines(), f"{self.where} (the docs)", "now", lineterm=""
        )
        pytest.fail(
            f"{self.where} no longer shows what its commands print ({RECORD}=1 rewrites a whole block):\n"
            + "\n".join(diff),
            pytrace=False,
        )

    def _rewrite(self, body: str) -> None:
        text = self.page.read_text()
        [match] = [m for m in MARKER.finditer(text) if m["owner"] == self.owner]
        self.page.write_text(text[: match.start("body")] + body + text[match.end("body") :])

    def assert_shows(self, line: str) -> None:
        """One of the block's lines is ``line``."""
        if recording.normalised(line) not in self.lines:
            pytest.fail(f"{self.where} no longer shows the line now printed:\n{line}\n(it shows)\n{self.body}")


def _per_command(body: str) -> list[str]:
    """What each command of ``body`` printed (the text after each ``$`` line)."""
    return re.split(r"^\$ .*\n", body, flags=re.M)[1:]


def _within(shown: str, printed: str) -> bool:
    want, have = shown.splitlines(), printed.splitlines()
    return any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start()) + 1, m["owner"], m["body"]) for m in MARKER.finditer(text)]


def owned_block(page: Path) -> Block:
    """The block of ``page`` whose marker names the test that runs now."""
    owner = running_test()
    mine = [block for block in blocks(page) if block.owner == owner]
    assert len(mine) == 1, f"{page}: {len(mine)} blocks marked <!-- compared by {owner} -->"
    return mine[0]
