"""Turn a GPU runbook's output folder into fixture sets that the tests replay, with their sources.

Usage: python benchmarks/gpu/fixtures.py RUNBOOK_OUT [--dest tests/fixtures/gpu/recorded]
       [--sources tests/fixtures/gpu/SOURCES.md]

RUNBOOK_OUT is the runbook's output folder, or the archive ``benchmarks/gpu/session.sh`` packed it into.

For each state the runbook recorded, ``recorded/`` (healthy) and ``recorded-busy/`` (while the noisy
neighbour computed), writes ``DEST/<gpu>-<driver>[-busy]/``: every recorded answer byte for byte,
``commands.json``, ``facts.json``, ``inventory/``, the ``summary.json`` of the ``validate gpu-node`` run
made in the same state (``gpu-node-after/`` or ``gpu-node/``, ``gpu-node-busy/``) as
``live-gpu-node-summary.json``, DCGM's raw output of the runbook's ``dcgm/`` step where it ran (idle set
only, as ``dcgm-<file>``), and ``SOURCE.md`` with an ``## Edits`` section. The one edit: each GPU's serial,
UUID and PDI (read from the recorded ``nvidia-smi -q -x``) become zeros of the same length in every file, as
NVIDIA's k8s-test-infra scrubs its captures; no check reads them. Adds one row per set to SOURCES. Refuses
(exit 2, one line) a folder with no recording, a state without its gpu-node summary, and a set that exists already.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: (recording, gpu-node runs of the same state (the first found), name suffix, what the machine was doing)
STATES = (
    ("recorded", ("gpu-node-after", "gpu-node"), "", "idle (nothing else on the GPU)"),
    (
        "recorded-busy",
        ("gpu-node-busy",),
        "-busy",
        "busy: `probe.py noisy` multiplied bf16 matrices on the GPU throughout (the runbook's noisy neighbour)",
    ),
)
#: What the runbook's DCGM step keeps (``dcgm/``), copied into the idle set as ``dcgm-<name>``: made on the idle GPU.
DCGM_FILES = ("version.txt", "diag.json", "diag.err", "diag.rc")
#: The row of SOURCES this script adds goes into the table under this heading.
SOURCES_HEADING = "## Recorded by gpuready's GPU runbook on real machines"


class Refused(Exception):
    """Bad input: one line, exit 2."""


@dataclass(frozen=True)
class Identifier:
    field: str
    value: str
    zeroed: str


def identifiers(smi_xml: str) -> list[Identifier]:
    """Each GPU's serial, UUID and PDI in the recorded ``nvidia-smi -q -x``, with the zeros that replace them
    (GPU i's UUID ends in i, so the GPUs of one node stay apart)."""
    found = []
    for i, gpu in enumerate(ET.fromstring(smi_xml).findall("gpu")):
        for field in ("serial", "uuid", "pdi"):
            value = (gpu.findtext(field) or "").strip()
            if not value or value == "N/A" or not value.strip("GPU-0x"):
                continue  # absent, or zeros already
            if field == "uuid":
                zeroed = "GPU-" + re.sub(r"[0-9a-fA-F]", "0", value[4:])
                zeroed = zeroed[: len(zeroed) - len(str(i))] + str(i) if i else zeroed
            elif field == "pdi":
                zeroed = value[:2] + "0" * (len(value) - 2)
            else:
                zeroed = "0" * len(value)
            found.append(Identifier(field, value, zeroed))
    return found


def scrub(data: bytes, ids: list[Identifier]) -> tuple[bytes, set[str]]:
    touched = set()
    for ident in ids:
        if ident.value.encode() in data:
            data = data.replace(ident.value.encode(), ident.zeroed.encode())
            touched.add(ident.field)
    return data, touched


def live_summary(out: Path, runs: tuple[str, ...]) -> tuple[str, Path]:
    """The gpu-node run made in a recording's state and its one summary.json."""
    run = next((r for r in runs if (out / r).is_dir()), runs[0])
    found = sorted((out / run).glob("*/summary.json"))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise Refused(f"{what} summary.json under {out / run}/*/: the gpu-node run of this state did not finish once")
    return run, found[0]


def fixture_name(facts: dict[str, str | int], suffix: str) -> str:
    model = re.sub(r"[^a-z0-9]+", "-", str(facts["gpu_model"]).lower().removeprefix("nvidia ")).strip("-")
    count = f"-x{facts['gpu_count']}" if int(facts["gpu_count"]) > 1 else ""
    return f"{model}{count}-{facts['driver']}{suffix}"


def edits_section(ids: list[Identifier], files: dict[str, list[str]], step: str) -> str:
    lines = ["", "## Edits (identifiers only)"]
    if ids:
        lines += [
            "Imported by `benchmarks/gpu/fixtures.py`: each GPU identifier below was replaced by zeros of the same",
            "length in every file, as NVIDIA's k8s-test-infra scrubs its captures; no check reads them:",
        ]
        for field in ("serial", "uuid", "pdi"):
            mine = [i for i in ids if i.field == field]
            if mine:
                shown = ", ".join(f"`{z}`" for z in dict.fromkeys(i.zeroed for i in mine))
                shown += f" ({len(mine)} GPUs)" if len(mine) > 1 else ""
                lines.append(f"- `{field}` -> {shown} in {', '.join(f'`{f}`' for f in files[field])}")
    else:
        lines.append("Imported by `benchmarks/gpu/fixtures.py`: no GPU identifier to replace (none, or zeros already).")
    lines += [
        "",
        "Nothing else was edited. `live-gpu-node-summary.json` is `summary.json` of `gpuready validate gpu-node`",
        f"run on that machine against this recording's `inventory/` in the same state ({step}).",
    ]
    return "\n".join(lines) + "\n"


def source_facts(source: str) -> dict[str, str]:
    """host, kernel and date from the SOURCE.md that record.py wrote."""
    found = {}
    for key in ("host", "date"):
        match = re.search(rf"^- {key}: (.+)$", source, re.M)
        found[key] = match.group(1) if match else "unknown"
    return found


def sources_row(name: str, facts: dict[str, str | int], source: dict[str, str], state: str) -> str:
    return (
        f"| `recorded/{name}/` | every command of the node catalogue and of its measuring batch (DCGM, nccl-tests, "
        f"nvbandwidth, gpuready's probe, each as present or absent there) on {facts['gpu_count']}x "
        f"{facts['gpu_model']} ({facts['memory']}), driver {facts['driver']}, CUDA {facts['cuda']}, "
        f"host {source['host']}; the GPU {state}; its inventory and the live `validate gpu-node` summary "
        f"| recorded on {source['date']} by `benchmarks/gpu/runbook.sh` (`record.py`), imported by "
        "`benchmarks/gpu/fixtures.py`; stdout/stderr/exit byte for byte, except the GPU identifiers zeroed "
        "as that folder's SOURCE.md lists |"
    )


def add_source_row(sources: Path, name: str, row: str) -> None:
    text = sources.read_text()
    if f"`recorded/{name}/`" in text:
        return
    head, found, tail = text.partition(SOURCES_HEADING)
    if not found:
        raise Refused(f"{sources}: no '{SOURCES_HEADING}' section to add the row to")
    lines = tail.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        raise Refused(f"{sources}: no table under '{SOURCES_HEADING}' to add the row to")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines.insert(end, row)
    sources.write_text(head + found + "\n".join(lines))


def import_state(
    out: Path, recording: str, runs: tuple[str, ...], suffix: str, state: str, dest: Path, sources: Path
) -> str:
    folder = out / recording
    index = json.loads((folder / "commands.json").read_text())
    facts = json.loads((folder / "facts.json").read_text())
    run, summary = live_summary(out, runs)
    name = fixture_name(facts, suffix)
    target = dest / name
    if target.exists():
        raise Refused(f"{target} exists: a recording is never replaced silently (remove it first)")
    ids = identifiers((folder / index["nvidia-smi -q -x"]["stdout"]).read_text())
    files: dict[str, list[str]] = {}
    copies = [(folder / "commands.json", "commands.json"), (folder / "facts.json", "facts.json")]
    for entry in index.values():
        base = str(entry["stdout"]).removesuffix(".out")
        copies += [(folder / f"{base}{ext}", f"{base}{ext}") for ext in (".out", ".err", ".rc")]
    copies.append((summary, "live-gpu-node-summary.json"))
    if not suffix:
        copies += [(out / "dcgm" / f, f"dcgm-{f}") for f in DCGM_FILES if (out / "dcgm" / f).is_file()]
    staged = dest / f".{name}.partial"
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    try:
        for src, rel in copies:
            data, touched = scrub(src.read_bytes(), ids)
            for field in touched:
                files.setdefault(field, []).append(rel)
            (staged / rel).write_bytes(data)
        shutil.copytree(folder / "inventory", staged / "inventory")
        recorded_source = (folder / "SOURCE.md").read_text()
        (staged / "SOURCE.md").write_text(recorded_source + edits_section(ids, files, f"`{run}/` of the runbook"))
        left = [i.field for i in ids for p in staged.rglob("*") if p.is_file() and i.value.encode() in p.read_bytes()]
        if left:
            raise Refused(f"{name}: identifiers still present after the edit ({', '.join(sorted(set(left)))})")
        staged.rename(target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    add_source_row(sources, name, sources_row(name, facts, source_facts(recorded_source), state))
    return name


def verdicts(summary: Path) -> str:
    counts: dict[str, int] = {}
    for check in json.loads(summary.read_text())["checks"]:
        counts[check["status"]] = counts.get(check["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def unpack(archive: Path, into: Path) -> Path:
    """The runbook folder inside ``archive``, unpacked under ``into``; members outside that folder are refused."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        tops = {Path(m.name).parts[0] for m in members if m.name}
        for m in members:
            if not (m.isfile() or m.isdir()) or Path(m.name).is_absolute() or ".." in Path(m.name).parts:
                raise Refused(f"{archive}: {m.name!r} is not a plain file inside the runbook's folder")
        if len(tops) != 1:
            raise Refused(f"{archive}: holds {len(tops)} top folders, not one runbook output folder")
        # Every member checked above; the "data" filter (Python 3.11.4 and later) checks again.
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(into, members=members, **extra)  # type: ignore[arg-type]
    return into / tops.pop()


def convert(given: Path, dest: Path, sources: Path, scratch: Path) -> int:
    try:
        out = unpack(given, scratch) if given.is_file() else given
        states = [s for s in STATES if (out / s[0] / "commands.json").is_file()]
        if not states:
            raise Refused(
                f"no recording in {given} (no recorded/commands.json): run benchmarks/gpu/runbook.sh on a GPU "
                "machine (benchmarks/gpu/session.sh packs its output)"
            )
        for _, runs, _, _ in states:  # every state checked before anything is written
            live_summary(out, runs)
        for recording, runs, suffix, state in states:
            name = import_state(out, recording, runs, suffix, state, dest, sources)
            summary = dest / name / "live-gpu-node-summary.json"
            print(f"fixtures: {dest / name} (live gpu-node: {verdicts(summary)})")
    except Refused as e:
        print(f"fixtures: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, ET.ParseError, tarfile.TarError) as e:
        print(f"fixtures: cannot read the runbook's output in {given}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print("fixtures: next, list each set in tests/unit/node/test_recorded_machines.py with its expected verdicts")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fixtures.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, metavar="RUNBOOK_OUT")
    parser.add_argument("--dest", type=Path, default=ROOT / "tests" / "fixtures" / "gpu" / "recorded")
    parser.add_argument("--sources", type=Path, default=ROOT / "tests" / "fixtures" / "gpu" / "SOURCES.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as unpacked:
        return convert(args.out, args.dest, args.sources, Path(unpacked))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
