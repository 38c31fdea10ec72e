"""analysis.ranking: knob importance by several methods over synthetic configs (nothing is run)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from knobtune.analysis.ranking import METHODS, MIN_ROWS, Ranking, rank_knobs, top_k

KINDS = {
    "write_buffer_size": "numeric",  # informative, strongest
    "compression": "enum",  # informative
    "max_background_jobs": "numeric",  # special value -1 = auto among its samples
    "block_size": "numeric",
    "bloom_bits": "numeric",
    "cache_index": "bool",
    "compaction_style": "enum",
    "level0_trigger": "numeric",
    "max_open_files": "numeric",
    "paranoid_checks": "bool",  # never varies
}
INFORMATIVE = {"write_buffer_size", "compression"}
CONSTANT = "paranoid_checks"


def synthetic(n: int, seed: int = 7) -> tuple[list[dict[str, object]], list[float]]:
    """Rows whose value depends strongly on write_buffer_size and compression, plus noise."""
    rng = np.random.default_rng(seed)
    rows, values = [], []
    for _ in range(n):
        row: dict[str, object] = {
            "write_buffer_size": float(rng.uniform(0, 10)),
            "compression": str(rng.choice(["lz4", "none", "zstd"])),
            "max_background_jobs": -1 if rng.random() < 0.2 else int(rng.integers(1, 16)),
            "block_size": float(rng.uniform(1, 64)),
            "bloom_bits": float(rng.uniform(0, 20)),
            "cache_index": bool(rng.integers(2)),
            "compaction_style": str(rng.choice(["level", "universal"])),
            "level0_trigger": int(rng.integers(2, 40)),
            "max_open_files": float(rng.uniform(-1, 5000)),
            "paranoid_checks": True,
        }
        effect = {"lz4": 0.0, "none": -12.0, "zstd": 6.0}[str(row["compression"])]
        values.append(100 + 4.0 * float(row["write_buffer_size"]) + effect + float(rng.normal(0, 1.5)))
        rows.append(row)
    return rows, values


@pytest.fixture(scope="module")
def ranking() -> Ranking:
    rows, values = synthetic(150)
    return rank_knobs(rows, values, kinds=KINDS, seed=0, bootstrap=20)


@pytest.mark.slow
def test_every_method_runs_and_finds_the_two_informative_knobs(ranking: Ranking) -> None:
    assert tuple(ranking.methods) == METHODS
    assert ranking.skipped == {}
    assert ranking.samples == 150
    for method, importances in ranking.methods.items():
        best_two = set(sorted(importances, key=importances.__getitem__, reverse=True)[:2])
        assert best_two == INFORMATIVE, method
        assert sum(importances[k] for k in INFORMATIVE) > 0.6, method
    assert ranking.order[0] == "write_buffer_size"
    assert set(ranking.order[:2]) == INFORMATIVE
    assert top_k(ranking, 2) == ranking.order[:2]


@pytest.mark.slow
def test_importances_are_normalised_and_cover_every_knob(ranking: Ranking) -> None:
    assert sorted(ranking.order) == sorted(KINDS)
    for importances in ranking.methods.values():
        assert set(importances) == set(KINDS)
        assert all(v >= 0 for v in importances.values())
        assert sum(importances.values()) == pytest.approx(1.0)


@pytest.mark.slow
def test_a_constant_knob_scores_zero_and_ranks_last(ranking: Ranking) -> None:
    assert ranking.order[-1] == CONSTANT
    assert all(importances[CONSTANT] == 0.0 for importances in ranking.methods.values())


@pytest.mark.slow
def test_methods_agree(ranking: Ranking) -> None:
    pairs = {f"{a}~{b}" for i, a in enumerate(METHODS) for b in METHODS[i + 1:]}
    assert set(ranking.agreement) == pairs
    assert all(-1.0 <= tau <= 1.0 for tau in ranking.agreement.values())
    # the informative knobs lead in every method, so every pair agrees well beyond chance
    assert min(ranking.agreement.values()) > 0.3
    # the three methods over one forest agree closely
    assert ranking.agreement["impurity~shap"] > 0.6


@pytest.mark.slow
def test_top_k_stability(ranking: Ranking) -> None:
    assert set(ranking.top_k_stability) == {1, 3, 5}  # k < 10 knobs
    assert all(0.0 <= share <= 1.0 for share in ranking.top_k_stability.values())
    assert ranking.top_k_stability[1] >= 0.9  # write_buffer_size leads every refit


@pytest.mark.slow
def test_top_k_stability_is_high_for_a_top_three_that_is_real() -> None:
    rng = np.random.default_rng(3)
    kinds = {f"knob_{j}": "numeric" for j in range(6)}
    rows = [{k: float(rng.uniform(0, 1)) for k in kinds} for _ in range(120)]
    values = [9 * r["knob_0"] + 6 * r["knob_1"] + 3 * r["knob_2"] + float(rng.normal(0, 0.1)) for r in rows]
    ranking = rank_knobs(rows, values, kinds=kinds, methods=("impurity",), bootstrap=20)
    assert ranking.order[:3] == ("knob_0", "knob_1", "knob_2")
    assert set(ranking.top_k_stability) == {1, 3, 5}
    assert ranking.top_k_stability[1] >= 0.9
    assert ranking.top_k_stability[3] >= 0.9
    assert ranking.top_k_stability[5] < 1.0  # the 4th and 5th knobs are noise: their order is not stable


def test_too_few_rows_skips_every_method_with_the_reason() -> None:
    rows, values = synthetic(MIN_ROWS - 1)
    ranking = rank_knobs(rows, values, kinds=KINDS)
    assert ranking.methods == {}
    assert ranking.agreement == {}
    assert ranking.top_k_stability == {}
    assert set(ranking.skipped) == set(METHODS)
    assert all(f"at least {MIN_ROWS}" in reason for reason in ranking.skipped.values())
    assert sorted(ranking.order) == sorted(KINDS)
    assert ranking.order[-1] == CONSTANT


def test_values_that_never_vary_skip_every_method() -> None:
    rows, _ = synthetic(20)
    ranking = rank_knobs(rows, [1.0] * 20, kinds=KINDS, methods=("impurity", "fanova"))
    assert ranking.methods == {}
    assert set(ranking.skipped) == {"impurity", "fanova"}
    assert "same value" in ranking.skipped["impurity"]


def test_a_missing_shap_skips_only_shap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "shap", None)  # import shap now raises ImportError
    rows, values = synthetic(60)
    ranking = rank_knobs(rows, values, kinds=KINDS, methods=("impurity", "shap"), bootstrap=0)
    assert tuple(ranking.methods) == ("impurity",)
    assert "pip install shap" in ranking.skipped["shap"]
    assert ranking.agreement == {}  # fewer than two methods
    assert ranking.top_k_stability == {}  # bootstrap=0


def test_a_missing_scikit_learn_skips_every_method(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)
    rows, values = synthetic(30)
    ranking = rank_knobs(rows, values, kinds=KINDS)
    assert ranking.methods == {} and ranking.top_k_stability == {}
    assert all("pip install scikit-learn" in reason for reason in ranking.skipped.values())
    assert set(ranking.skipped) == set(METHODS)


@pytest.mark.slow
def test_round_trips_through_json(ranking: Ranking) -> None:
    data = json.loads(json.dumps(ranking.to_dict()))
    assert Ranking.from_dict(data) == ranking
    assert data["top_k_stability"] == {"1": ranking.top_k_stability[1], "3": ranking.top_k_stability[3],
                                       "5": ranking.top_k_stability[5]}


@pytest.mark.slow
def test_same_seed_same_ranking() -> None:
    rows, values = synthetic(40)
    first = rank_knobs(rows, values, kinds=KINDS, seed=5, bootstrap=5)
    again = rank_knobs(rows, values, kinds=KINDS, seed=5, bootstrap=5)
    assert first.to_dict() == again.to_dict()


def test_bools_and_mixed_enums_are_ranked() -> None:
    rng = np.random.default_rng(11)
    kinds = {"use_fsync": "bool", "wal_level": "enum", "threads": "enum", "noise": "numeric"}
    rows = [{"use_fsync": bool(rng.integers(2)), "wal_level": str(rng.choice(["minimal", "replica", "logical"])),
             "threads": [1, 4, "auto"][int(rng.integers(3))], "noise": float(rng.normal())} for _ in range(80)]
    values = [50 - 30 * r["use_fsync"] + (10 if r["threads"] == "auto" else 0) + float(rng.normal(0, 1))
              for r in rows]
    ranking = rank_knobs(rows, values, kinds=kinds, methods=("impurity", "shap", "fanova"), bootstrap=0)
    assert ranking.skipped == {}
    assert ranking.order[:2] == ("use_fsync", "threads")
    for importances in ranking.methods.values():
        assert importances["use_fsync"] > importances["wal_level"]


@pytest.mark.parametrize(("rows", "values", "kinds", "message"), [
    ([{"a": 1.0}], [1.0, 2.0], {"a": "numeric"}, "1 rows but 2 values"),
    ([{"a": 1.0}], [1.0], {"a": "float"}, "unknown knob kind"),
    ([{"a": 1.0}], [1.0], {"a": "numeric", "b": "bool"}, "lacks knob"),
    ([{"a": "big"}], [1.0], {"a": "numeric"}, "numeric knob 'a'"),
    ([{"a": "yes"}], [1.0], {"a": "bool"}, "bool knob 'a'"),
    ([{"a": float("nan")}], [1.0], {"a": "numeric"}, "not finite"),
    ([{"a": 1.0}], [float("inf")], {"a": "numeric"}, "not finite"),
])
def test_bad_input_is_refused(rows: list[dict[str, object]], values: list[float], kinds: dict[str, str],
                              message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rank_knobs(rows, values, kinds=kinds)


def test_unknown_method_is_refused() -> None:
    rows, values = synthetic(10)
    with pytest.raises(ValueError, match="unknown ranking method"):
        rank_knobs(rows, values, kinds=KINDS, methods=("gini",))


def test_top_k() -> None:
    ranking = Ranking(order=("a", "b", "c"), methods={}, agreement={}, top_k_stability={}, samples=0)
    assert top_k(ranking, 2) == ("a", "b")
    assert top_k(ranking, 5) == ("a", "b", "c")
    with pytest.raises(ValueError):
        top_k(ranking, -1)
