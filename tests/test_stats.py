"""The statistics `show` prints about a study's ladder (pure: no runs)."""

from __future__ import annotations

import pytest

from knobtune.analysis.stats import rung_agreement


def test_a_rung_that_ranks_like_the_next_has_rho_one_and_a_reversed_one_minus_one() -> None:
    configs = [{0: v, 1: 10 * v, 2: -v} for v in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)]
    agreement = rung_agreement(configs)
    assert [(a["from"], a["to"], a["n"]) for a in agreement] == [(0, 1, 6), (1, 2, 6)]
    assert agreement[0]["rho"] == pytest.approx(1.0)
    assert agreement[1]["rho"] == pytest.approx(-1.0)


def test_only_configs_measured_at_both_rungs_count_and_too_few_give_nothing() -> None:
    pruned = [{0: float(v)} for v in range(20)]  # never reached rung 1
    promoted = [{0: 1.0, 1: 2.0}, {0: 2.0, 1: 1.0}, {0: 3.0, 1: 3.0}]
    assert rung_agreement(pruned + promoted) == []  # 3 pairs: below the minimum of 5
    assert rung_agreement(pruned + promoted, minimum=3)[0]["n"] == 3
