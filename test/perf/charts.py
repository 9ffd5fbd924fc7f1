"""PNG charts of the fast-path benchmark's figures (matplotlib, the ``perf`` extra).

``latency_chart``: one box per path (p5-p95 whiskers, p50 written beside it) on a log scale,
so paths a few ms apart and paths seconds apart read on one chart. ``throughput_chart``:
images/s against concurrent clients, batching off and on, with in-process batched inference
as the line to reach. ``peers_chart``: bench_peers.py's requests/s against connections, one
panel per scenario, one line per server.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter  # noqa: E402


def latency_chart(figures: dict, title: str, path: Path) -> None:
    """Boxes of ``figures[label]["samples_ms"]`` for every path that has samples."""
    labels = [label for label, value in figures.items() if isinstance(value, dict)
              and value.get("samples_ms")]  # fmt: skip
    samples = [figures[label]["samples_ms"] for label in labels]
    figure, axes = plt.subplots(figsize=(9, 0.6 * len(labels) + 1.6))
    axes.boxplot(samples, vert=False, whis=(5, 95), showfliers=False, widths=0.6)
    axes.set_yticks(range(1, len(labels) + 1), labels)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(ScalarFormatter())
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("latency, ms (log scale; box: p25-p75, whiskers: p5-p95)")
    for row, label in enumerate(labels, start=1):
        p50, p95 = figures[label]["p50_ms"], figures[label]["p95_ms"]
        axes.annotate(f"p50 {p50:g} ms", (p95, row), xytext=(6, 0), textcoords="offset points",
                      va="center", fontsize=8)  # fmt: skip
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def throughput_chart(models: dict, title: str, path: Path) -> None:
    """One panel per model: ``models[model]["curve"][label][clients]`` images/s."""
    names = [name for name, figures in models.items() if figures.get("curve")]
    figure, panels = plt.subplots(1, len(names), figsize=(5 * len(names), 3.8), squeeze=False)
    for axes, name in zip(panels[0], names, strict=True):
        curve = models[name]["curve"]
        for label in ("batching_off", "batching_on"):
            clients = sorted(curve[label], key=int)
            axes.plot([int(c) for c in clients], [curve[label][c] for c in clients], marker="o",
                      label=label.replace("_", " "))  # fmt: skip
        axes.axhline(models[name]["in_process_batched_images_per_s"], color="grey",
                     linestyle="--", label="in-process batched")  # fmt: skip
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(ScalarFormatter())
        axes.set_xlabel("concurrent clients")
        axes.set_ylabel("images/s")
        axes.set_ylim(bottom=0)
        axes.set_title(name, fontsize=10)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def peers_chart(results: dict, scenarios: list[str], path: Path) -> None:
    """``results["servers"][name]["cells"][scenario][connections]["req_per_s"]``."""
    colours = {name: f"C{index}" for index, name in enumerate(results["servers"])}
    figure, panels = plt.subplots(
        1, len(scenarios), figsize=(3.6 * len(scenarios), 3.6), squeeze=False
    )
    for axes, scenario in zip(panels[0], scenarios, strict=True):
        for name, server in results["servers"].items():
            cells = server.get("cells", {}).get(scenario)
            if not isinstance(cells, dict) or "error" in cells:
                continue
            counts = sorted((c for c in cells if cells[c].get("requests")), key=int)
            if counts:
                axes.plot([int(c) for c in counts], [cells[c]["req_per_s"] for c in counts],
                          marker="o", label=name, color=colours[name])  # fmt: skip
        axes.set_xscale("log", base=2)
        axes.set_xticks([1, 8, 32])
        axes.xaxis.set_major_formatter(ScalarFormatter())
        axes.set_yscale("log")
        axes.set_xlabel("connections")
        axes.set_ylabel("requests/s")
        axes.set_title(scenario, fontsize=10)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
