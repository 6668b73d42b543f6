"""The docs' console samples are what the commands print: scripts/record-doc-samples re-runs each one and
compares (run folders, times and sizes normalised)."""

from __future__ import annotations

import ast
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.doc_samples import owned_block, running_test

SCRIPT = ROOT / "scripts" / "record-doc-samples"
START = "<!-- recorded: run by scripts/record-doc-samples -->"


#: Seconds a stopped record-doc-samples gets to take its labs down (a Kubernetes lab's down takes about 10).
TEARDOWN_S = 120


def check(*files: Path, lab: str = "", timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``record-doc-samples --check`` on ``files`` (default: every doc), only the samples of ``lab`` when given.

    Past ``timeout``, or when pytest-timeout ends the test, it is stopped with SIGTERM, which it answers by taking
    its labs down; subprocess.run's SIGKILL would leave them running."""
    with subprocess.Popen(
        [sys.executable, str(SCRIPT), "--check", *(["--lab", lab] if lab else []), *map(str, files)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as recorder:
        try:
            out, err = recorder.communicate(timeout=timeout)
        except BaseException:
            recorder.send_signal(signal.SIGTERM)
            try:
                recorder.communicate(timeout=TEARDOWN_S)
            except subprocess.TimeoutExpired:
                recorder.kill()
                recorder.communicate()
            raise
    return subprocess.CompletedProcess(recorder.args, recorder.returncode, out, err)


@pytest.mark.slow
def test_every_recorded_sample_without_a_lab_still_matches_what_its_commands_print() -> None:
    """The samples that need a lab are checked with their lab's tests (tests/integration/*/test_doc_samples.py)."""
    assert START in (ROOT / "README.md").read_text()  # the tour's sample is one of them
    done = check(lab="none")
    assert done.returncode == 0, done.stdout + done.stderr


def _page(tmp_path: Path, output: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    page = tmp_path / "page.md"
    page.write_text(
        f"Text.\n\n{START}\n```console\n$ gpuready inventory init --only local\n{output}```\n"
        "<!-- /recorded -->\n\nMore text.\n"
    )
    return page


def test_a_sample_that_no_longer_matches_fails_the_check_with_a_diff(tmp_path: Path) -> None:
    printed = "inventories/local\nnext: gpuready inventory check -i inventories/local\n"
    assert check(_page(tmp_path, printed)).returncode == 0
    stale = printed.replace("check -i", "check --inventory")  # one line the command no longer prints
    done = check(_page(tmp_path, stale))
    assert done.returncode == 1
    assert "-next: gpuready inventory check --inventory inventories/local" in done.stdout
    assert "+next: gpuready inventory check -i inventories/local" in done.stdout


def test_recording_rewrites_only_the_sample(tmp_path: Path) -> None:
    page = _page(tmp_path, "stale\n")
    done = subprocess.run([sys.executable, str(SCRIPT), str(page)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = "inventories/local\nnext: gpuready inventory check -i inventories/local\n"
    assert page.read_text() == _page(tmp_path / "again", printed).read_text()


def _sample(tmp_path: Path, body: str, options: str = "") -> Path:
    page = tmp_path / "sample.md"
    start = START.replace(" -->", f"{options} -->")
    page.write_text(f"{start}\n```console\n{body}```\n<!-- /recorded -->\n")
    return page


def test_a_sample_is_one_shell_session_what_one_command_exports_the_next_has(tmp_path: Path) -> None:
    body = "$ export SAMPLE_WORD=kept\n$ echo $SAMPLE_WORD\nkept\n"
    assert check(_sample(tmp_path, body)).returncode == 0
    done = check(_sample(tmp_path, body.removesuffix("kept\n") + "lost\n"))  # as if the export were lost
    assert done.returncode == 1 and "+kept" in done.stdout


@pytest.mark.parametrize("cache", ["/srv/ci-cache", "/tmp/ci-cache", "checkout"])
def test_the_users_cache_folder_matches_wherever_xdg_cache_home_puts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: str
) -> None:
    """A sample recorded with the cache in ~/.cache matches a run whose XDG_CACHE_HOME is elsewhere (a CI cache
    folder, a temporary one, one inside the checkout); nothing but the cache folder is left out."""
    folder = str(ROOT / ".ci-cache") if cache == "checkout" else cache
    monkeypatch.setenv("XDG_CACHE_HOME", folder)
    command = '$ echo "kubectl ($XDG_CACHE_HOME/gpuready/kubernetes-v1.34.4/bin/kubectl)"\n'
    recorded = "kubectl (/root/.cache/gpuready/kubernetes-v1.34.4/bin/kubectl)\n"
    assert check(_sample(tmp_path, command + recorded)).returncode == 0
    done = check(_sample(tmp_path, command + recorded.replace("kubectl)", "kubectl) and more")))
    # The diff shows the fresh output as a recording would write it: the cache as the docs show it.
    assert done.returncode == 1 and "+kubectl (~/.cache/gpuready/kubernetes-v1.34.4/bin/kubectl)\n" in done.stdout


def test_a_sample_whose_figures_vary_is_compared_without_its_numbers_only(tmp_path: Path) -> None:
    body = "$ echo '│ 1 │ 11.79 │ 100.0% │'\n│ 1 │ 120.5 │ 99.5% │\n"
    assert check(_sample(tmp_path, body)).returncode == 1  # measured figures differ from run to run
    assert check(_sample(tmp_path, body, "; varies: figures")).returncode == 0
    # Anything but the numbers still counts.
    drifted = body.replace("│ 1 │ 120.5 │ 99.5% │", "│ 1 │ 120.5 │ 99.5% │ extra │")
    assert check(_sample(tmp_path, drifted, "; varies: figures")).returncode == 1


def test_the_samples_are_grouped_by_the_lab_or_run_they_need(tmp_path: Path) -> None:
    page = tmp_path / "labs.md"
    page.write_text(
        f"{START.replace(' -->', '; lab: nodes -->')}\n```console\n$ false\n```\n<!-- /recorded -->\n"
        f"{START}\n```console\n$ gpuready lab up --components kubernetes\n```\n<!-- /recorded -->\n"
    )
    # Neither is run for the samples that need no lab: the check passes without bringing a lab up.
    done = check(page, lab="none")
    assert done.returncode == 0 and not done.stdout, done.stdout + done.stderr


#: A fenced block of gpuready's console output: a gpuready command typed, a refusal, or a verdict's first line.
CONSOLE = re.compile(
    r"^(\$ gpuready |gpuready: error: |(validate|provision) [a-z-]+( \(check mode\))?: (PASSED|FAILED|ERROR)\b)", re.M
)
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```\n", re.M | re.S)
RECORDED = re.compile(r"<!-- recorded: run by scripts/record-doc-samples[^>]*-->\n$")
#: A sample whose commands need a set-up only one test makes: that test, which compares it (tests/doc_samples.py).
COMPARED = re.compile(r"<!-- compared by (?P<file>tests/[\w/]+\.py)::(?P<function>\w+) -->\n$")


def _compares_its_block(file: str, function: str) -> bool:
    """``function`` is a test of ``file`` that looks its block up (and so fails when the block drifts)."""
    path = ROOT / file
    if not path.is_file():
        return False
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return any(isinstance(n, ast.Name) and n.id == "owned_block" for n in ast.walk(node))
    return False


def test_every_console_sample_of_gpuready_in_the_docs_is_recorded_or_compared_by_a_test() -> None:
    unmarked = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for block in FENCE.finditer(text):
            if not CONSOLE.search(block.group(1)):
                continue
            before = text[: block.start()]
            if RECORDED.search(before):
                continue
            if (owner := COMPARED.search(before)) and _compares_its_block(owner["file"], owner["function"]):
                continue
            unmarked.append(f"{page.relative_to(ROOT)}:{before.count(chr(10)) + 1}")
    assert not unmarked, (
        "console samples neither recorded (<!-- recorded: run by scripts/record-doc-samples -->) nor compared by "
        f"the test their marker names (<!-- compared by tests/FILE.py::TEST -->): {unmarked}"
    )


def test_a_compared_block_that_no_longer_matches_fails_the_test_that_owns_it(tmp_path: Path) -> None:
    owner = running_test()
    page = tmp_path / "page.md"
    sample = "$ echo 'node-a: 8 GPUs'\nnode-a: 8 GPUs\n"
    page.write_text(f"<!-- compared by {owner} -->\n```console\n{sample}```\n")
    block = owned_block(page)
    block.assert_printed(block.run(tmp_path))
    drifted_sample = sample.replace("\nnode-a: 8", "\nnode-a: 4")  # one character of the output
    page.write_text(f"<!-- compared by {owner} -->\n```console\n{drifted_sample}```\n")
    drifted = owned_block(page)
    with pytest.raises(pytest.fail.Exception, match=r"(?s)-node-a: 4 GPUs\n\+node-a: 8 GPUs"):
        drifted.assert_printed(drifted.run(tmp_path))
    # An excerpt is compared as consecutive lines of what was printed, normalised the way recorded samples are.
    page.write_text(f"<!-- compared by {owner} -->\n```console\n$ printf 'a\\nb 3 s\\nc\\n'\nb 9 s\nc\n```\n")
    excerpt = owned_block(page)
    excerpt.assert_printed(excerpt.run(tmp_path), excerpt=True)
    with pytest.raises(pytest.fail.Exception):
        excerpt.assert_printed(excerpt.run(tmp_path))  # the whole of it is three lines


def test_a_training_samples_progress_lines_count_as_its_figures(tmp_path: Path) -> None:
    """How many progress lines a training prints follows how long it ran, as its images/s do: a sample whose
    figures vary matches a run with more or fewer of them, and nothing else is left out."""
    run = "printf 'training on 2 CPU workers...\\n  2 CPU workers: step 3/51, 4.1 images/s so far\\ndone\\n'"
    body = f"$ {run}\ntraining on 2 CPU workers...\ndone\n"
    assert check(_sample(tmp_path, body)).returncode == 1
    assert check(_sample(tmp_path, body, "; varies: figures")).returncode == 0
    assert check(_sample(tmp_path, body.replace("done\n", "finished\n"), "; varies: figures")).returncode == 1
