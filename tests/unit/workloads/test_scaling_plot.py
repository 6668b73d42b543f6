"""scaling.png: the legend never covers a data marker, whatever the figures (a 1-worker efficiency of 100% sat at
the top left, under a legend placed there), and it stays inside the image."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.workloads.controller import report


def _row(workers: int, images_per_second: float, base: float) -> dict:
    """A size's row as scaling.sweep_figures makes it (efficiency against the 1-worker run: 1.0 for it)."""
    per_worker = images_per_second / workers
    return {
        "workers": workers,
        "images_per_second": images_per_second,
        "images_per_second_per_worker": per_worker,
        "efficiency": round(per_worker / base, 4),
    }


#: Sweeps of every shape: near-linear (the seeds' vSphere study: 2757.21 images/s on 1 node, 10675.09 on 4),
#: scaling that collapses, and a CPU run whose total falls as workers are added.
SWEEPS = {
    "vsphere-study": [(1, 2757.21), (2, 5400.0), (4, 10675.09)],
    "collapsing": [(1, 1000.0), (2, 1200.0), (4, 900.0), (8, 400.0)],
    "cpu-falling": [(1, 31.8), (2, 43.3)],
    "single": [(1, 500.0)],
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_the_legend_covers_no_marker_and_stays_in_the_image(name: str, tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = SWEEPS[name][0][1]
    rows = [_row(w, ips, base) for w, ips in SWEEPS[name]]
    fig = report.figure(rows, f"Training scaling: {name}")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend())]
    assert legends
    lines = [line for a in fig.axes for line in a.get_lines()]
    assert len(lines) >= 1 + (rows[0]["workers"] == 1)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
        for line in lines:
            # A marker's reach in pixels: markersize is in points, 72 to the inch.
            reach = line.get_markersize() * fig.dpi / 72 / 2
            for x, y in line.get_transform().transform(line.get_xydata()):
                inside = box.x0 - reach <= x <= box.x1 + reach and box.y0 - reach <= y <= box.y1 + reach
                assert not inside, f"{line.get_label()} marker at ({x:.0f}, {y:.0f}) px under the legend {box}"
    plt.close(fig)
    # The file the CLI writes comes from the same figure.
    assert report.plot(rows, tmp_path / "scaling.png", name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
