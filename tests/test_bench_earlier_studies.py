"""The earlier-studies bench's yardstick (bench/earlier_studies.py): a study's gains are measured against the median
of its default's runs, not its first run alone. Pure functions over stored outputs; the bench itself runs the real
system (bench/questions/earlier-studies.toml)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import earlier_studies  # noqa: E402  (bench/ holds scripts, not a package)


def test_a_slow_first_default_run_does_not_inflate_the_gains() -> None:
    summary = {"default_value": 3.161, "default_runs": [3.161, 2.469, 2.558]}
    assert earlier_studies.baseline(summary) == pytest.approx(2.558)
    assert earlier_studies.baseline({"default_value": 2.5, "default_runs": []}) == 2.5, "no controls: the first run"
    assert earlier_studies.baseline({"default_value": None}) is None


def test_the_table_says_what_its_gains_were_measured_against() -> None:
    def result(arm: dict) -> dict:
        seed = {"seed": 1, "arms": {name: {**arm, "study": name, "earlier_studies": [], "tried_first": [],
                                           "best_gain": 1.4, "verified_speedup": None, "verdict": "v"}
                                    for name in ("earlier", "warm", "cold", "unrelated")},
                "cold_gain": 1.4, "reached_cold_gain_s": {"cold": 10.0, "warm": 4.0, "unrelated": None},
                "warm_to_cold_time": 0.4,
                "half_or_less": True, "unrelated_took": False, "unrelated_to_cold_gain": 0.9}
        return {"pairs": [{"earlier": "a", "later": "b", "seeds": [seed]}], "args": {"time": "3m", "seeds": [1]},
                "unrelated_study": {"workload": "c"}}

    assert "the median of the study's own default runs" in earlier_studies.table(result({"baseline": 2.5}))
    older = earlier_studies.table(result({}))
    assert "its first full-size run" in older and "median" not in older
    assert "in 1 of the 1 pair-seeds" in older
