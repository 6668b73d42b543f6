"""Text from the inventory and from nodes lands inert wherever it is shown: report.md rendered by the Markdown
renderers that show it (Python-Markdown with tables, what MkDocs uses; markdown-it-py, CommonMark as CI summaries
and wikis read it) holds no element the payload made, and `validate -v` and `report show -v` write no escape
sequence a terminal would obey. Replayed on this machine: the lab's recorded nvidia-smi, with one edit (the
first GPU's product name carries the payload, as a name read from a board could)."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
from markdown_it import MarkdownIt

from gpuready.lab import replay
from tests.conftest import ModuleTmp, gpuready
from tests.unit.core.test_bad_inputs import make_inventory, with_settings

MODEL = "Tesla V100-SXM2-32GB"
#: A host name a browser would run, without spaces (a host pattern cannot hold one).
HOST = "<img/src=x/onerror=alert(1)>"
#: Markup in the GPU name (XML-escaped in the recording, as nvidia-smi writes it), and a link.
GPU_PAYLOAD = "<script>alert(2)</script>[x](javascript:alert(3))"
#: A terminal would set its title, clear the screen and show a hyperlink.
TERMINAL = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://example.invalid\x1b\\link\x1b]8;;\x1b\\"


class Tags(HTMLParser):
    """Every element and attribute of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def elements(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


@pytest.fixture(scope="module")
def run(module_tmp: ModuleTmp) -> tuple[Path, str]:
    tmp_path = module_tmp("markup")
    tools = replay.build("v100-x4", tmp_path / "replay")
    data = tools.parent / "data"
    xml = (data / "q.xml").read_text()
    escaped = GPU_PAYLOAD.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    (data / "q.xml").write_text(xml.replace(MODEL, MODEL + escaped, 1))
    csv = (data / "query.csv").read_text()
    (data / "query.csv").write_text(csv.replace(MODEL, MODEL + GPU_PAYLOAD, 1))
    hosts = {"gpu_nodes": {"hosts": {HOST: {"ansible_connection": "local"}}}}
    settings = with_settings(node_classes__v100={"gpu_model": MODEL, "gpu_count": 4})
    inv = make_inventory(tmp_path, hosts=hosts, settings=settings)
    runs = tmp_path / "runs"
    path = f"{tools}:{os.environ['PATH']}"
    done = gpuready(
        "validate", "gpu-node", "-i", str(inv), "--only", "gpu.model", "--artifacts", str(runs), env={"PATH": path}
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [folder] = runs.iterdir()
    return folder, done.stdout + done.stderr


def test_report_md_renders_no_element_from_a_node(run: tuple[Path, str]) -> None:
    folder, _ = run
    text = (folder / "report.md").read_text()
    assert "gpu.model" in text and "alert(2)" in text  # the payloads are there, as text
    for html in (markdown.markdown(text, extensions=["tables"]), MarkdownIt("commonmark").enable("table").render(text)):
        made = [(tag, attrs) for tag, attrs in elements(html) if tag in ("img", "script", "a")]
        assert made == [], made
        assert "alert(1)" in html and "alert(2)" in html  # shown, not run


def test_verbose_terminal_output_obeys_no_escape_sequence(tmp_path: Path, run: tuple[Path, str]) -> None:
    folder, _ = run
    evil = tmp_path / "0001-evil"
    evil.mkdir()
    summary = json.loads((folder / "summary.json").read_text())
    for check in summary["checks"]:
        check["host"] = "gpu01" + TERMINAL
        check["message"] += TERMINAL
        check["remedy"] = (check.get("remedy") or "") + TERMINAL
    (evil / "summary.json").write_text(json.dumps(summary))
    for args in (["report", "show", str(evil)], ["report", "show", str(evil), "-v"]):
        done = gpuready(*args, env={"TERM": "xterm", "COLUMNS": "200"})
        assert done.returncode == 1, done.stderr
        assert "\x1b" not in done.stdout + done.stderr, args
        assert "\\x1b]0;owned" in done.stdout, args  # written out, visibly
