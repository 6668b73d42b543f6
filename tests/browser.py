"""Headless Chromium for the report tests: a screenshot and the DOM after the page's scripts ran, with networking
cut off (its own network namespace where it can have one, and no proxy or DNS that answers in any case)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from tests.conftest import require


def chromium() -> str:
    path = shutil.which("chromium") or ""
    require(path, "needs Debian's chromium (scripts/install-system-deps)")
    return path


def shots_folder(tmp_path: Path) -> Path:
    """$GPUREADY_TEST_ARTIFACTS/report-screenshots, else the test's tmp folder: printed, to be looked at."""
    root = Path(os.environ["GPUREADY_TEST_ARTIFACTS"]) if os.environ.get("GPUREADY_TEST_ARTIFACTS") else tmp_path
    folder = root / "report-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"report screenshots in {folder}")
    return folder


def _offline(argv: list[str]) -> list[str]:
    """``argv`` in a network namespace of its own (no interface but a down loopback) when this is root."""
    if os.geteuid() == 0 and shutil.which("unshare"):
        return ["unshare", "--net", *argv]
    return argv


def _run(page: Path, *flags: str, height: int) -> subprocess.CompletedProcess[str]:
    argv = [
        chromium(),
        "--headless",
        "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces it may not get
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size=1280,{height}",
        # Belt and braces beside the namespace: every name resolves to nothing, every request to a dead proxy.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--virtual-time-budget=3000",
        *flags,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(_offline(argv), capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def screenshot(page: Path, png: Path, height: int = 2400) -> Path:
    _run(page, f"--screenshot={png}", height=height)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"no screenshot of {page}"
    return png


def dom(page: Path, then: str = "") -> Dom:
    """The DOM after ``page``'s scripts ran; ``then``: a script run after them, from a copy of the page (a
    click on a heading, as a person would)."""
    if then:
        copy = page.with_name(page.stem + "-driven.html")
        text = page.read_text(encoding="utf-8")
        copy.write_text(text.replace("</body>", f"<script>{then}</script></body>"), encoding="utf-8")
        page = copy
    parsed = Dom()
    parsed.feed(_run(page, "--dump-dom", height=1000).stdout)
    return parsed


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""
    children: list[Element] = field(default_factory=list)

    def find_all(self, tag: str, **attrs: str) -> list[Element]:
        found = []
        for child in self.children:
            if child.tag == tag and all(attrs[k] in child.attrs.get(k, "").split() for k in attrs):
                found.append(child)
            found += child.find_all(tag, **attrs)
        return found

    def by_id(self, id: str) -> Element:
        if self.attrs.get("id") == id:
            return self
        for child in self.children:
            try:
                return child.by_id(id)
            except KeyError:
                pass
        raise KeyError(id)

    @property
    def all_text(self) -> str:
        return self.text + "".join(c.all_text for c in self.children)


VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "wbr", "source"}


class Dom(HTMLParser):
    """The dumped document as a tree of elements (Chromium's dump is well formed: every element is closed)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        for key in ("src", "href", "action", "data", "poster"):
            if key in element.attrs:
                self.urls.append(element.attrs[key])
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Element("#text", {}, data))
