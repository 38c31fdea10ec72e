"""The headroom bench's reading of its steps (bench/headroom.py): which knobs it sweeps around the reference, and how
far the reference's result ran ahead of a short study's in their shared comparison. Pure functions over stored
outputs; the bench itself runs the real system (bench/questions/headroom-*.toml)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import headroom  # noqa: E402  (bench/ holds scripts, not a package)


def test_the_knobs_swept_are_those_of_the_largest_shares_a_step_of_two_knobs_included() -> None:
    explanation = {"steps": [{"knobs": ["compaction_style"], "share": 0.17},
                             {"knobs": ["block_size"], "share": -0.08},
                             {"knobs": ["hash_bucket_count", "write_buffer_size"], "share": 0.44},
                             {"knobs": ["cache_size"], "share": None}]}
    assert headroom.top_knobs(explanation, 2) == ["hash_bucket_count", "write_buffer_size"]
    assert headroom.top_knobs(explanation, 3) == ["hash_bucket_count", "write_buffer_size", "compaction_style"]
    assert headroom.top_knobs({}, 2) == []


def test_the_reference_over_a_short_study_is_measured_from_their_own_runs() -> None:
    comparison = {"objective": "elapsed_s", "values": {"ref": [2.80, 2.87, 2.73, 2.77, 2.83],
                                                       "short": [3.12, 3.06, 3.09, 3.20, 3.13]}}
    versus = headroom.reference_over(comparison, "ref", "short")
    assert versus is not None and versus["ratio"] == pytest.approx(3.12 / 2.80)
    assert 1.0 < versus["ci_low"] <= versus["ratio"] <= versus["ci_high"], "the reference's runs are all faster"
    throughput = {"objective": "ops_per_s", "values": {"ref": [200.0] * 3, "short": [100.0] * 3}}
    assert headroom.reference_over(throughput, "ref", "short")["ratio"] == pytest.approx(2.0)
    assert headroom.reference_over(comparison, None, "short") is None, "no reference won: nothing to measure"
    assert headroom.reference_over({"values": {"ref": [1.0]}}, "ref", "short") is None


def test_the_table_shows_the_reference_over_each_short_study_only_when_measured() -> None:
    short = {"budget": "5m", "gain": {"ratio": 1.8, "ci_low": 1.7, "ci_high": 1.9}, "share_of_reference": 0.9,
             "time": {"window_s": 1, "settle_s": 1, "rest_of_trials_s": 1, "between_trials_s": 0,
                      "verification_s": 1, "trials_per_min": 20.0}}
    data = {"system": "rocksdb", "reference_arms": ["tpe:1"], "reference_time": "20m", "sweep_knobs": 2,
            "repeats": 5, "budgets": ["5m"],
            "workloads": [{"workload": "w", "short": [short],
                           "reference": {"gain": {"ratio": 1.9, "ci_low": 1.8, "ci_high": 2.0}, "sweeps": []}}]}
    assert "reference over it" not in headroom.table(data)
    short["reference_over"] = {"ratio": 1.12, "ci_low": 1.08, "ci_high": 1.15}
    shown = headroom.table(data)
    assert "5m: gain, share, reference over it" in shown and "1.80x (1.70-1.90), 90%, 1.12x (1.08-1.15)" in shown
