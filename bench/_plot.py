"""One picture the benchmarks share: the best value so far over time, one line per run, one color per arm."""

from __future__ import annotations

from pathlib import Path


def plot_best_over_time(lines: list[dict], out: Path, *, title: str, ylabel: str) -> None:
    """Draw ``lines`` into a PNG at ``out``.

    Each line: {"arm": name (one color per arm), "points": [(seconds, value), ...] as steps,
    "end": optional (seconds, value, low, high), a final figure with its 95% CI drawn as an error bar}.
    Needs matplotlib (the bench extra: pip install -e ".[bench]").
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(dict.fromkeys(line["arm"] for line in lines))
    colors = {arm: plt.get_cmap("tab10")(i) for i, arm in enumerate(arms)}
    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=110)
    labelled: set[str] = set()
    for line in lines:
        color, arm = colors[line["arm"]], line["arm"]
        points = line["points"]
        if points:
            xs, ys = zip(*points)
            axes.step(xs, ys, where="post", color=color, alpha=0.75, label=None if arm in labelled else arm)
            labelled.add(arm)
        if line.get("end"):
            x, y, low, high = line["end"]
            axes.errorbar([x], [y], yerr=[[y - low], [high - y]], fmt="o", color=color, capsize=3, alpha=0.9)
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlabel("seconds since the arm began")
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)
