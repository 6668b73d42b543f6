"""Runs from different environments side by side: images/s per worker count and each run's overhead
against the first, as the seeds compared bare metal with Kubernetes (about 8% at 8 GPUs) and VMs
with bare metal (within 2%)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput

PLOT_FILE = "comparison.png"


@dataclass(frozen=True)
class Run:
    label: str
    folder: Path
    sizes: dict[int, float]  # workers -> images/s total
    setup: dict[str, Any]


def load(spec: str) -> Run:
    """``FOLDER`` or ``FOLDER=LABEL``; FOLDER is a `validate training` run folder (or its summary.json)."""
    path, _, label = spec.partition("=")
    folder = Path(path)
    summary = folder if folder.name == "summary.json" else folder / "summary.json"
    try:
        data = json.loads(summary.read_text())
    except OSError as e:
        raise BadInput(f"{summary}: cannot read ({e.strerror}); give a `validate training` run folder") from e
    except json.JSONDecodeError as e:
        raise BadInput(f"{summary}: not JSON ({e.msg})") from e
    training = data.get("metrics", {}).get("training")
    if not training or not training.get("sizes"):
        raise BadInput(f"{summary}: no training figures (is it a `validate training` run that trained?)")
    default = f"{training.get('launcher')}@{training.get('where')} ({summary.parent.name})"
    return Run(
        label or default,
        summary.parent,
        {int(r["workers"]): float(r["images_per_second"]) for r in training["sizes"]},
        training,
    )


#: setup keys that must match for images/s to be comparable
SAME_SETUP = ("framework", "model", "batch_size", "image_size", "data", "mixed_precision", "xla", "compiled")
#: what a run recorded before the key existed meant
_BEFORE = {"framework": "tensorflow", "compiled": False}


def setup_differences(runs: list[Run]) -> list[str]:
    """What differs between each run's set-up and the first's: a comparison across set-ups measures those too."""

    def get(run: Run, key: str) -> Any:
        return run.setup.get(key, _BEFORE.get(key))

    return [
        f"{run.label}: {key} {get(run, key)!r} (first: {get(runs[0], key)!r})"
        for run in runs[1:]
        for key in SAME_SETUP
        if get(run, key) != get(runs[0], key)
    ]


def overhead(base: float, value: float) -> float:
    """How much slower ``value`` is than ``base``, in percent (negative: faster)."""
    return 100.0 * (base - value) / base


def table(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per worker count any run measured; per run its images/s and overhead against the first run."""
    rows = []
    for n in sorted({n for r in runs for n in r.sizes}):
        base = runs[0].sizes.get(n)
        cells = []
        for run in runs:
            value = run.sizes.get(n)
            cells.append(
                {
                    "label": run.label,
                    "images_per_second": value,
                    "overhead_percent": None if value is None or not base else round(overhead(base, value), 2),
                }
            )
        rows.append({"workers": n, "runs": cells})
    return rows


def markdown(rows: list[dict[str, Any]], runs: list[Run]) -> str:
    head = "| workers | " + " | ".join(r.label for r in runs) + " |"
    lines = [f"# Comparison against {runs[0].label}", ""]
    differences = setup_differences(runs)
    if differences:
        lines += [
            "Set-ups differ, so the overheads include these differences:",
            "",
            *[f"- {d}" for d in differences],
            "",
        ]
    lines += [head, "|---:|" + "---:|" * len(runs)]
    for row in rows:
        lines.append(f"| {row['workers']} | " + " | ".join(cells(row)) + " |")
    lines += [
        "",
        "images/s (total); in brackets each run's overhead against the first: (first - run) / first.",
        "",
        f"![comparison]({PLOT_FILE})",
    ]
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for run in runs:
        sizes = sorted(run.sizes)
        ax.plot(sizes, [run.sizes[n] for n in sizes], "o-", label=run.label)
    cpu = any(str(run.setup.get("device", "")).startswith("CPU") for run in runs)
    ax.set_xlabel("workers (CPU processes)" if cpu else "workers (GPUs)")
    ax.set_ylabel("images/s (total)")
    ax.set_xticks(sorted({n for r in runs for n in r.sizes}))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def cells(row: dict[str, Any]) -> list[str]:
    """A size's images/s in each run, with each later run's overhead against the first ("—": not measured)."""
    out = []
    for i, c in enumerate(row["runs"]):
        if c["images_per_second"] is None:
            out.append("—")
        elif i == 0 or c["overhead_percent"] is None:
            out.append(f"{c['images_per_second']:.1f}")
        else:
            out.append(f"{c['images_per_second']:.1f} ({c['overhead_percent']:+.1f}%)")
    return out
