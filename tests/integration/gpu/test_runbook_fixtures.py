"""From a GPU runbook's output to the fixtures the tests replay: session.sh packs the output as the device
tool can bring it back, fixtures.py turns it into fixture sets with their sources.

The input is the real H100 recording in tests/fixtures/gpu/recorded/, laid out again as the runbook writes
it (its SOURCE.md without the section the import adds, its live summary as the gpu-node run's summary.json).
One named edit: the GPU's serial, zeroed in the fixture, gets a 13-digit value back in the two files that
hold it (the XML and ``nvidia-smi -q``), so the import has an identifier to zero again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.conftest import ROOT

GPU = ROOT / "benchmarks" / "gpu"
RECORDED = ROOT / "tests" / "fixtures" / "gpu" / "recorded"
H100 = "h100-80gb-hbm3-580.159.04"
SERIAL = "1654922012345"  # the planted serial (13 digits, as nvidia-smi prints an H100's)
ROW = f"| `recorded/{H100}/` |"
#: The serial's field in each file that holds it (the XML, and ``nvidia-smi -q``'s text).
SERIAL_FIELDS = {
    "01-nvidia-smi-q-x.out": "<serial>{}</serial>",
    "24-nvidia-smi-q.out": "Serial Number                                      : {}\n",
}


def runbook_output(folder: Path, *recordings: str) -> Path:
    """The fixture as the runbook left it: each recording folder, and the gpu-node run of its state."""
    fixture = RECORDED / H100
    for recording in recordings:
        target = folder / recording
        shutil.copytree(fixture, target, ignore=shutil.ignore_patterns("live-gpu-node-summary.json"))
        source = target / "SOURCE.md"
        source.write_text(source.read_text().split("\n## Edits")[0])
        for name, field in SERIAL_FIELDS.items():
            text = (target / name).read_text()
            assert text.count(field.format("0000000000000")) == 1  # the zeroed serial, the one field edited
            (target / name).write_text(text.replace(field.format("0000000000000"), field.format(SERIAL)))
        run = {"recorded": "gpu-node-after", "recorded-busy": "gpu-node-busy"}[recording]
        (folder / run / "run-1").mkdir(parents=True)
        shutil.copy(fixture / "live-gpu-node-summary.json", folder / run / "run-1" / "summary.json")
    return folder


def sources_without_the_row(tmp_path: Path) -> Path:
    sources = tmp_path / "SOURCES.md"
    text = (RECORDED.parent / "SOURCES.md").read_text()
    sources.write_text("\n".join(line for line in text.split("\n") if not line.startswith(ROW)))
    return sources


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*map(str, args)], capture_output=True, text=True, timeout=120, check=False)


def fixtures(source: Path, dest: Path, sources: Path) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, GPU / "fixtures.py", source, "--dest", dest, "--sources", sources)


def test_a_packed_runbook_output_becomes_the_fixture_it_was_made_from(tmp_path: Path) -> None:
    out = runbook_output(tmp_path / "gpu-runbook-20261126T035000Z", "recorded")
    (out / ".cache" / "gpuready").mkdir(parents=True)  # the compile cache: big, and never packed
    (out / ".cache" / "gpuready" / "kernel.so").write_bytes(b"\0" * 4096)
    back = tmp_path / "back"
    back.mkdir()
    packed = run(GPU / "session.sh", back, out)
    assert packed.returncode == 0, packed.stderr
    archive = back / f"{out.name}.tar.gz"
    assert packed.stdout.strip() == f"session: {archive} (0 MiB), runbook exit 0"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert f"{out.name}/recorded/01-nvidia-smi-q-x.out" in names and not any("/.cache" in n for n in names)
    # at most 8 files come back from the device, two folders down, named plainly: the archive is one
    assert sorted(p.name for p in back.iterdir()) == [archive.name]

    dest, sources = tmp_path / "fixtures", sources_without_the_row(tmp_path)
    dest.mkdir()
    done = fixtures(archive, dest, sources)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"fixtures: {dest / H100} (live gpu-node: 17 passed, 15 skipped)"
    made, kept = dest / H100, RECORDED / H100
    files = sorted(p.relative_to(kept) for p in kept.rglob("*") if p.is_file())
    assert sorted(p.relative_to(made) for p in made.rglob("*") if p.is_file()) == files
    for name in files:  # byte for byte, the serial zeroed again; SOURCE.md gets the import's own section
        if name != Path("SOURCE.md"):
            assert (made / name).read_bytes() == (kept / name).read_bytes(), name
    source = (made / "SOURCE.md").read_text()
    assert source.startswith(kept.joinpath("SOURCE.md").read_text().split("\n## Edits")[0])
    assert "- `serial` -> `0000000000000` in `01-nvidia-smi-q-x.out`, `24-nvidia-smi-q.out`" in source
    assert "`uuid`" not in source  # zeros already: nothing to edit, nothing claimed
    assert "in the same state (`gpu-node-after/` of the runbook)" in source
    rows = [line for line in sources.read_text().split("\n") if line.startswith(ROW)]
    assert len(rows) == 1 and "1x NVIDIA H100 80GB HBM3 (81559 MiB), driver 580.159.04, CUDA 13.0" in rows[0]
    assert "recorded on 2026-11-26 03:50 UTC" in rows[0] and "the GPU idle" in rows[0]
    # the row sits in the runbook's table, before the next section
    section = sources.read_text().split("## Recorded by gpuready's GPU runbook")[1].split("\n## ")[0]
    assert rows[0] in section

    again = fixtures(archive, dest, sources)  # never over a set that exists
    assert again.returncode == 2 and again.stderr == (
        f"fixtures: {dest / H100} exists: a recording is never replaced silently (remove it first)\n"
    )


def test_each_recorded_state_becomes_its_own_set_with_its_own_row(tmp_path: Path) -> None:
    # Two states laid out from the one real recording: the import names and describes each by its folder.
    out = runbook_output(tmp_path / "out", "recorded", "recorded-busy")
    # DCGM's step ran on the idle GPU: its raw JSON (here DCGM's own recorded `dcgmi diag` JSON, see SOURCES) and
    # the exit status the runbook wrote go into the idle set byte for byte (scrubbed as every file); the busy set has
    # none, and a file the step did not leave is not made up.
    dcgm_json = (RECORDED.parent / "dcgm" / "dcgmi-diag-r1-json-3.1.0-x8-jsonresulttests.txt").read_bytes()
    (out / "dcgm").mkdir()
    (out / "dcgm" / "diag.json").write_bytes(dcgm_json)
    (out / "dcgm" / "diag.rc").write_text("0\n")
    dest, sources = tmp_path / "fixtures", sources_without_the_row(tmp_path)
    dest.mkdir()
    done = fixtures(out, dest, sources)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in dest.iterdir()) == [H100, f"{H100}-busy"]
    busy = [line for line in sources.read_text().split("\n") if line.startswith(f"| `recorded/{H100}-busy/` |")]
    assert len(busy) == 1 and "the GPU busy: `probe.py noisy` multiplied bf16 matrices" in busy[0]
    assert json.loads((dest / f"{H100}-busy" / "live-gpu-node-summary.json").read_text())["checks"]
    assert (dest / H100 / "dcgm-diag.json").read_bytes() == dcgm_json
    assert (dest / H100 / "dcgm-diag.rc").read_text() == "0\n" and not (dest / H100 / "dcgm-diag.err").exists()
    assert not list((dest / f"{H100}-busy").glob("dcgm-*"))


def test_a_state_without_its_gpu_node_run_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = runbook_output(tmp_path / "out", "recorded", "recorded-busy")
    shutil.rmtree(out / "gpu-node-busy")
    dest, sources = tmp_path / "fixtures", sources_without_the_row(tmp_path)
    dest.mkdir()
    before = sources.read_text()
    done = fixtures(out, dest, sources)
    assert done.returncode == 2 and done.stderr == (
        f"fixtures: no summary.json under {out}/gpu-node-busy/*/: the gpu-node run of this state did not finish once\n"
    )
    assert not any(dest.iterdir()) and sources.read_text() == before


def test_no_gpu_here_means_no_recording_and_a_clear_refusal(tmp_path: Path) -> None:
    # This machine has no GPU: the recorder and the runbook refuse for real and leave nothing to import.
    path = {**os.environ, "PATH": "/usr/bin:/bin"}
    recorder = subprocess.run(
        [sys.executable, str(GPU / "record.py"), str(tmp_path / "out" / "recorded")],
        capture_output=True,
        text=True,
        env=path,
        timeout=60,
        check=False,
    )
    assert recorder.returncode == 3 and recorder.stderr.startswith("record: no working nvidia-smi here")
    (tmp_path / "out").mkdir(exist_ok=True)
    back = tmp_path / "back"
    back.mkdir()
    session = subprocess.run(
        [str(GPU / "session.sh"), str(back)], capture_output=True, text=True, env=path, timeout=60, check=False
    )
    assert session.returncode == 3 and session.stderr.splitlines()[-1] == "session: the runbook wrote nothing (exit 3)"
    assert not any(back.iterdir())
    done = fixtures(tmp_path / "out", tmp_path, tmp_path / "SOURCES.md")
    assert done.returncode == 2 and done.stderr == (
        f"fixtures: no recording in {tmp_path / 'out'} (no recorded/commands.json): run benchmarks/gpu/runbook.sh "
        "on a GPU machine (benchmarks/gpu/session.sh packs its output)\n"
    )
    bad = run(GPU / "session.sh", tmp_path / "nowhere")
    assert bad.returncode == 2 and bad.stderr == f"session: {tmp_path / 'nowhere'} is not a writable folder\n"


def test_each_gpu_keeps_an_identifier_of_its_own_once_zeroed() -> None:
    # Two RTX 2070 of one host as telegraf recorded them (tests/fixtures/gpu/SOURCES.md): serial N/A, UUIDs and
    # PDIs set. Zeroed, the GPUs still differ: GPU i's UUID ends in i.
    spec = importlib.util.spec_from_file_location("runbook_fixtures", GPU / "fixtures.py")
    assert spec is not None and spec.loader is not None
    importer = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = importer  # its dataclass looks its module up there
    spec.loader.exec_module(importer)
    xml = (ROOT / "tests" / "fixtures" / "gpu" / "cut" / "dual-rtx-2070-590.44.01-v13.xml").read_text()
    found = [(i.field, i.value, i.zeroed) for i in importer.identifiers(xml)]
    assert found == [
        ("uuid", "GPU-12345678-aaaa-bbbb-cccc-0123456789ab", "GPU-00000000-0000-0000-0000-000000000000"),
        ("pdi", "0x123456789a0bcdef", "0x0000000000000000"),
        ("uuid", "GPU-12345678-aaaa-bbbb-cccc-0123456789cd", "GPU-00000000-0000-0000-0000-000000000001"),
        ("pdi", "0x1234567890abcdef", "0x0000000000000000"),
    ]
    scrubbed, touched = importer.scrub(xml.encode(), importer.identifiers(xml))
    assert touched == {"uuid", "pdi"} and b"12345678" not in scrubbed and len(scrubbed) == len(xml.encode())
