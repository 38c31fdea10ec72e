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


def _raced(n: int, half_over_cold: float, cold_won: bool, cold_half_over_cold: float | None = None) -> dict:
    """One pair-seed of a stored result with its race: warm at half the time (and, when given, cold at half the
    time) over cold's result, each with an interval 0.05 either side."""
    arm = {"baseline": 2.5, "earlier_studies": [], "tried_first": [], "best_gain": 1.4, "verdict": "v",
           "verified_speedup": {"ratio": 1.3, "ci_low": 1.2, "ci_high": 1.4, "won": cold_won}}
    over = {"warm-half": {"ratio": half_over_cold, "ci_low": half_over_cold - 0.05, "ci_high": half_over_cold + 0.05},
            "default": {"ratio": 0.77, "ci_low": 0.7, "ci_high": 0.8}}
    if cold_half_over_cold is not None:
        over["cold-half"] = {"ratio": cold_half_over_cold, "ci_low": cold_half_over_cold - 0.05,
                             "ci_high": cold_half_over_cold + 0.05}
    return {"seed": n, "arms": {name: {**arm, "study": name}
                                for name in ("earlier", "warm", "cold", "unrelated", "warm-half", "cold-half")},
            "cold_gain": 1.4, "reached_cold_gain_s": {"cold": 10.0, "warm": 8.0, "unrelated": None},
            "warm_to_cold_time": 0.8, "half_or_less": False, "unrelated_took": False,
            "unrelated_to_cold_gain": 1.0, "race": {"repeats": 5, "noise_cv": 0.03, "over_cold": over},
            "half_time_reached": half_over_cold >= 1 if cold_won else None}


def _raced_result(seeds: list[dict]) -> dict:
    return {"pairs": [{"earlier": "a", "later": "b", "seeds": seeds}],
            "args": {"time": "3m", "seeds": [s["seed"] for s in seeds], "race_repeats": 5},
            "unrelated_study": {"workload": "c"}}


def test_the_race_counts_warm_at_half_the_time_reaching_cold_only_where_cold_verified_a_gain() -> None:
    text = earlier_studies.table(_raced_result([_raced(1, 1.04, True), _raced(2, 0.91, True), _raced(3, 1.2, False),
                                                _raced(4, 0.97, True)]))
    assert "ran at least as fast as cold's in 1 of the 3 pair-seeds where cold's study verified a gain" in text
    assert "not behind it beyond the noise (its 95% interval over cold's reaching 1) in 2." in text
    assert "| a -> b | 4 | 0.77x (0.70-0.80) | 0.97x (0.92-1.02) | level: behind within the noise | - | 3.0% |" in text
    assert "warm at half the time (90s)" in text
    assert "| a -> b | 1 | 0.77x (0.70-0.80) | 1.04x (0.99-1.09) | yes | - | 3.0% |" in text
    assert "| a -> b | 2 | 0.77x (0.70-0.80) | 0.91x (0.86-0.96) | no | - | 3.0% |" in text
    assert "| a -> b | 3 |" in text and "no gain to reach (cold kept the default)" in text
    assert "| a -> b | 1 | warm-half (warm-half) |" in text, "the half-time study's own verdict is listed"
    assert "The control" not in text, "a result from before the control says nothing of it"


def test_the_control_at_half_the_time_tells_where_learning_made_the_difference() -> None:
    text = earlier_studies.table(_raced_result([
        _raced(1, 0.98, True, 0.9),   # warm level, cold at half behind: learning did it
        _raced(2, 1.0, True, 1.0),    # both level: cold's own search found it in half the time too
        _raced(3, 0.9, True, 1.0),    # warm behind, cold at half level: learning cost it
        _raced(4, 1.0, False, 0.8)]))  # cold kept the default: nothing to reach
    assert ("The control, cold at half the time (no earlier studies), was level with cold's result on its own in "
            "2 of 3: learning made the difference (warm at half the time level, cold at half the time behind beyond "
            "the noise) in 1, and the other way round in 1.") in text
    assert ("| a -> b | 1 | 0.77x (0.70-0.80) | 0.98x (0.93-1.03) | level: behind within the noise "
            "| 0.90x (0.85-0.95) | 3.0% |") in text
    assert "| a -> b | 1 | cold-half (cold-half) |" in text, "the control's own verdict is listed"


def test_the_half_time_study_again_is_counted_beside_the_one_before_and_the_control() -> None:
    import earlier_studies_again

    def seed(n: int, before: float, again: float, control: float, cold_won: bool = True) -> dict:
        over = {arm: {"ratio": r, "ci_low": r - 0.05, "ci_high": r + 0.05}
                for arm, r in (("warm-half", before), ("warm-half-again", again), ("cold-half", control),
                               ("default", 0.6))}
        arm = {"study": f"b-s{n}-warm-half-again", "verdict": "v", "tried_first": [{"label": "earlier study a-s1 "
               "trial 3"}], "verified_speedup": {"ratio": 1.5, "ci_low": 1.4, "ci_high": 1.6, "won": True}}
        return {"seed": n, "arm": arm, "race": {"noise_cv": 0.02, "over_cold": over}, "cold_won": cold_won}

    result = {"pairs": [{"earlier": "a", "later": "b", "seeds": [
        seed(1, 0.9, 1.02, 0.97), seed(2, 0.8, 0.97, 0.9), seed(3, 1.1, 0.5, 1.0, cold_won=False)]}],
        "args": {"time": "3m", "race_repeats": 5}}
    text = earlier_studies_again.table(result)
    assert ("Of the 2 pair-seeds where cold's study verified a gain: again, 1 at least as fast and 2 level; the run "
            "before's, 0 at least as fast and 0 level; the control, 0 at least as fast and 1 level (level: the 95% "
            "interval over cold's result reaching 1).") in text
    assert ("| a -> b | 1 | 0.60x (0.55-0.65) | 0.90x (0.85-0.95) | 1.02x (0.97-1.07) | 0.97x (0.92-1.02) "
            "| 2.0% |") in text
    assert "| a -> b | 3 | b-s3-warm-half-again | 1.50x (1.40-1.60) | earlier study a-s1 trial 3 | v |" in text
