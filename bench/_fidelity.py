"""How a replay ranks configs against the application it was captured from: the figures the replay-fidelity and
scan-lengths questions report (issue 56). Every argument is a list over the configs (the default first), each a
list of one config's measured times (seconds, lower is better); a config a side could not measure has none."""

from __future__ import annotations

import itertools
import statistics

from scipy import stats

MEANINGFUL_GAIN = 1.03  # the replay's best gain below which its share held on the application is not computed


def rank_agreement(small: list[list[float]], full: list[list[float]]) -> float | None:
    """Spearman's rho between a rung's ranking of the configs and the full replay's (medians)."""
    kept = [i for i in range(len(full)) if small[i] and full[i]]
    if len(kept) < 3:
        return None
    return round(float(stats.spearmanr([statistics.median(small[i]) for i in kept],
                                       [statistics.median(full[i]) for i in kept]).statistic), 3)


def fidelity(replay_times: list[list[float]], application_times: list[list[float]]) -> dict:
    """How the replay ranks the configs both sides measured against the application's ranking.

    - ``rho``: Spearman's rho of the two rankings (medians), over every config: configs the application itself
      cannot tell apart are ranked by noise on both sides, and pull it toward 0;
    - ``pairs``: the pairs of configs the application tells apart (every run of one faster than every run of the
      other), and ``agree``: how many of them the replay orders the same way (by medians): whether the replay tells
      a better config from a worse one where there is a difference to tell;
    - ``held``: the share of the replay's best gain the application sees, when the replay's best is ahead of the
      default beyond its runs' spread (every run of it faster than every run of the default) and by MEANINGFUL_GAIN
      or more; None otherwise (the ratio of two differences within a few per cent says nothing).
    """
    kept = [i for i in range(len(replay_times)) if replay_times[i] and application_times[i]]
    if len(kept) < 3 or 0 not in kept:
        return {"rho": None, "held": None, "kept": kept}
    replay = [statistics.median(replay_times[i]) for i in kept]
    application = [statistics.median(application_times[i]) for i in kept]
    rho = stats.spearmanr(replay, application).statistic
    pairs = agree = 0
    for a, b in itertools.combinations(range(len(kept)), 2):
        faster, slower = (a, b) if application[a] < application[b] else (b, a)
        if max(application_times[kept[faster]]) < min(application_times[kept[slower]]):
            pairs += 1
            agree += replay[faster] < replay[slower]
    best = min(range(len(kept)), key=lambda k: replay[k])
    default = kept.index(0)
    replay_gain = replay[default] / replay[best]
    application_gain = application[default] / application[best]
    resolved = max(replay_times[kept[best]]) < min(replay_times[0]) and replay_gain >= MEANINGFUL_GAIN
    held = (application_gain - 1) / (replay_gain - 1) if resolved else None
    return {"rho": round(float(rho), 3), "kept": kept, "pairs": pairs, "agree": agree, "best": kept[best],
            "replay_gain": round(replay_gain, 3), "application_gain": round(application_gain, 3),
            "held": round(held, 3) if held is not None else None}


def held_text(figure: dict) -> str:
    """A fidelity figure's share held, as a table cell."""
    if figure.get("held") is None and "pairs" in figure:
        return "-: the replay's best is not ahead beyond noise"
    return str(figure.get("held"))


def pairs_text(figure: dict) -> str:
    """A fidelity figure's pairs the application tells apart and the replay orders the same, as a table cell."""
    return f"{figure['agree']} of {figure['pairs']}" if "pairs" in figure else "-"
