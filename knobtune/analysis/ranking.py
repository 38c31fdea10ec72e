"""Which knobs matter: several importance methods side by side over sampled configs, and how far they agree.

Pure: takes plain rows (knob -> value, one per measured config) and their
measured values, fits models in memory and returns a ``Ranking``. Nothing is
run and no storage is opened.

Each knob becomes one numeric column: a numeric knob as its number (a special
value such as -1 = auto is just a number outside the knob's range; the trees
split on it like on any other value), a bool as 0/1, an enum as the ordinal
code of its value among the values seen, in sorted order. Ordinal codes
impose an order the enum does not have; trees cope, since a few splits
isolate any one code. fANOVA gets bools and enums as categorical choices.

The methods (``METHODS``):

- ``impurity``: a random forest's mean decrease in impurity.
- ``permutation``: how much the forest's fit (R^2, on the rows it was fitted
  on) drops when one knob's column is shuffled; negatives clipped at 0.
- ``shap``: mean absolute SHAP value of each knob under the same forest.
- ``fanova``: Optuna's fANOVA: the share of the variance of its own forest's
  prediction that each knob explains on its own, over the sampled ranges.

scikit-learn is needed for all four (Optuna's fANOVA uses it) and shap for
``shap``; both are imported only when a ranking is made, and a method whose
library is missing is skipped with the reason.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knobtune.analysis.importance import study_of

METHODS = ("impurity", "permutation", "shap", "fanova")
KINDS = ("numeric", "bool", "enum")
MIN_ROWS = 8
TOP_K = (1, 3, 5, 10)
FOREST_TREES = 300
FOREST_MIN_LEAF = 2
BOOTSTRAP_TREES = 50
PERMUTATION_REPEATS = 10
N_JOBS = -1


@dataclass(frozen=True)
class Ranking:
    """Knob importances by several methods, a consensus order, and how far the methods agree.

    ``order`` holds every knob, most important first: by mean rank over the
    methods that ran (ties by mean importance, then by name); knobs that never
    varied come last. ``methods`` maps each method that ran to knob ->
    importance, normalised to sum to 1 (all 0 when the method found nothing).
    ``agreement`` maps "a~b" to Kendall's tau-b between two methods'
    importances over the knobs that varied (a pair whose tau is undefined,
    because one method scored every knob alike, is left out).
    ``top_k_stability`` maps k to the share of bootstrap resamples whose
    top-k knobs by forest impurity equal the consensus top k.
    ``skipped`` maps each requested method that did not run to the reason.
    """

    order: tuple[str, ...]
    methods: dict[str, dict[str, float]]
    agreement: dict[str, float]
    top_k_stability: dict[int, float]
    samples: int
    skipped: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (``top_k_stability`` keys become strings)."""
        return {
            "order": list(self.order),
            "methods": {m: dict(imp) for m, imp in self.methods.items()},
            "agreement": dict(self.agreement),
            "top_k_stability": {str(k): v for k, v in self.top_k_stability.items()},
            "samples": self.samples,
            "skipped": dict(self.skipped),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ranking:
        """The inverse of ``to_dict``."""
        return cls(
            order=tuple(data["order"]),
            methods={m: {k: float(v) for k, v in imp.items()} for m, imp in data["methods"].items()},
            agreement={pair: float(tau) for pair, tau in data["agreement"].items()},
            top_k_stability={int(k): float(v) for k, v in data["top_k_stability"].items()},
            samples=int(data["samples"]),
            skipped=dict(data.get("skipped", {})),
        )


def top_k(ranking: Ranking, k: int) -> tuple[str, ...]:
    """The ``k`` most important knobs of a ranking (all of them when k exceeds their number).

    Raises:
        ValueError: k is negative.
    """
    if k < 0:
        raise ValueError(f"top_k needs k >= 0 (got {k})")
    return ranking.order[:k]


def rank_knobs(rows: Sequence[Mapping[str, object]], values: Sequence[float], *, kinds: Mapping[str, str],
               seed: int = 0, bootstrap: int = 50, methods: Sequence[str] = METHODS) -> Ranking:
    """Rank the knobs of ``kinds`` by how much the measured ``values`` depend on them.

    ``rows[i]`` is the config measured as ``values[i]``; every row holds every
    knob of ``kinds`` ("numeric", "bool" or "enum") and no other. A knob that
    never varies gets importance 0 in every method and ranks last; it is not
    given to the models. A method that cannot run (fewer than MIN_ROWS rows,
    nothing varies, a library missing) is left out and its reason recorded in
    ``skipped``. ``bootstrap`` forest refits give ``top_k_stability`` (0: none).
    The same inputs and seed give the same ranking.

    Raises:
        ValueError: rows and values differ in length, a row lacks a knob or
            holds an unknown one, a kind or method is unknown, a value cannot
            be encoded as its kind says, or a value is not finite.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown ranking method(s) {unknown}; known: {list(METHODS)}")
    knobs = tuple(kinds)
    x = _encode(rows, kinds)
    y = np.asarray(values, dtype=float)
    if y.shape != (len(rows),):
        raise ValueError(f"rank_knobs got {len(rows)} rows but {y.size} values")
    if not np.isfinite(y).all():
        raise ValueError("rank_knobs got a measured value that is not finite (nan or inf)")
    varies = np.array([np.unique(x[:, j]).size > 1 for j in range(len(knobs))], dtype=bool)
    varying = tuple(k for k, v in zip(knobs, varies) if v)
    x_varying = x[:, varies]
    requested = tuple(m for m in METHODS if m in methods)

    unavailable = _why_no_model(x_varying, y)
    if unavailable is None:
        raw, skipped = _run_methods(requested, x_varying, y, varying, kinds, seed)
    else:
        raw, skipped = {}, {m: unavailable for m in requested}
    scores = {m: _spread_over(knobs, varying, _normalised(r)) for m, r in raw.items()}
    order = _consensus(knobs, set(varying), scores)
    stability = {} if unavailable else _stability(x_varying, y, varying, order, seed, bootstrap)
    return Ranking(
        order=order,
        methods=scores,
        agreement=_agreement(scores, varying),
        top_k_stability=stability,
        samples=len(rows),
        skipped=skipped,
    )


def _encode(rows: Sequence[Mapping[str, object]], kinds: Mapping[str, str]) -> np.ndarray:
    """The rows as a float matrix, one column per knob of ``kinds`` in its order."""
    bad = {k: v for k, v in kinds.items() if v not in KINDS}
    if bad:
        raise ValueError(f"unknown knob kind(s) {bad}; known: {list(KINDS)}")
    for i, row in enumerate(rows):
        missing, extra = set(kinds) - set(row), set(row) - set(kinds)
        if missing or extra:
            raise ValueError(f"row {i} lacks knob(s) {sorted(missing)} or holds knob(s) without a kind {sorted(extra)}")
    columns = [_encode_column(name, kind, [row[name] for row in rows]) for name, kind in kinds.items()]
    return np.column_stack(columns) if columns else np.empty((len(rows), 0))


def _encode_column(name: str, kind: str, column: list[object]) -> np.ndarray:
    if kind == "enum":
        codes = {value: code for code, value in enumerate(_sorted_choices(column))}
        return np.array([codes[value] for value in column], dtype=float)
    if kind == "bool":
        if any(not isinstance(v, (bool, int, np.integer)) or v not in (0, 1) for v in column):
            raise ValueError(f"bool knob '{name}' holds a value that is not true/false: {column[:5]}...")
        return np.array([float(bool(v)) for v in column])
    try:
        encoded = np.array([float(v) for v in column])  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"numeric knob '{name}' holds a value that is not a number ({exc})") from exc
    if not np.isfinite(encoded).all():
        raise ValueError(f"numeric knob '{name}' holds a value that is not finite (nan or inf)")
    return encoded


def _sorted_choices(column: list[object]) -> list[object]:
    """An enum's distinct values in sorted order (by text when they do not compare, e.g. 1 and "auto")."""
    distinct = list(dict.fromkeys(column))
    try:
        return sorted(distinct)  # type: ignore[type-var]
    except TypeError:
        return sorted(distinct, key=lambda v: (type(v).__name__, str(v)))


def _run_methods(requested: Sequence[str], x: np.ndarray, y: np.ndarray, varying: Sequence[str],
                 kinds: Mapping[str, str], seed: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Raw importances over the varying knobs by each method that ran, and the reason of each that did not."""
    raw: dict[str, np.ndarray] = {}
    skipped: dict[str, str] = {}
    forest = _forest(x, y, seed, FOREST_TREES)
    if "impurity" in requested:
        raw["impurity"] = forest.feature_importances_
    if "permutation" in requested:
        raw["permutation"] = _permutation(forest, x, y, seed)
    if "shap" in requested:
        if _installed("shap"):
            raw["shap"] = _shap(forest, x)
        else:
            skipped["shap"] = "shap is not installed. Fix: pip install shap"
    if "fanova" in requested:
        try:
            raw["fanova"] = _fanova(x, y, varying, kinds, seed)
        except (RuntimeError, ValueError, ZeroDivisionError) as exc:
            skipped["fanova"] = f"Optuna's fANOVA failed: {exc}"
    return {m: raw[m] for m in requested if m in raw}, skipped


def _why_no_model(x: np.ndarray, y: np.ndarray) -> str | None:
    """Why no method can run on these rows, or None when they can."""
    if not _installed("sklearn"):
        return "scikit-learn is not installed. Fix: pip install scikit-learn"
    if x.shape[0] < MIN_ROWS:
        return f"{x.shape[0]} rows; a ranking needs at least {MIN_ROWS}. Fix: measure more configs"
    if x.shape[1] == 0:
        return "no knob varies across the rows. Fix: sample configs that differ"
    if np.ptp(y) == 0:
        return "every row measured the same value; there is nothing to explain"
    return None


def _installed(module: str) -> bool:
    """Whether an optional library imports (False also when it is installed but broken)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            __import__(module)
    except ImportError:
        return False
    return True


def _forest(x: np.ndarray, y: np.ndarray, seed: int, trees: int) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    forest = RandomForestRegressor(n_estimators=trees, min_samples_leaf=FOREST_MIN_LEAF,
                                   random_state=seed, n_jobs=N_JOBS).fit(x, y)
    return forest.set_params(n_jobs=1)  # it predicts a few hundred rows at a time: threads cost more than they save


def _permutation(forest: Any, x: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.inspection import permutation_importance

    result = permutation_importance(forest, x, y, n_repeats=PERMUTATION_REPEATS, random_state=seed)
    return np.clip(result.importances_mean, 0.0, None)


def _shap(forest: Any, x: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import shap

        values = shap.TreeExplainer(forest).shap_values(x, check_additivity=False)
    return np.abs(np.asarray(values)).mean(axis=0)


def _fanova(x: np.ndarray, y: np.ndarray, varying: Sequence[str], kinds: Mapping[str, str], seed: int) -> np.ndarray:
    """Optuna's fANOVA over an in-memory study of the rows: numeric knobs as floats, bools and enums as choices."""
    import optuna
    from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

    distributions: dict[str, BaseDistribution] = {}
    for j, name in enumerate(varying):
        if kinds[name] == "numeric":
            distributions[name] = FloatDistribution(float(x[:, j].min()), float(x[:, j].max()))
        else:
            distributions[name] = CategoricalDistribution(tuple(int(c) for c in np.unique(x[:, j])))
    trials = [
        optuna.trial.create_trial(
            params={name: float(v) if kinds[name] == "numeric" else int(v) for name, v in zip(varying, row)},
            distributions=distributions,
            value=float(value),
        )
        for row, value in zip(x, y)
    ]
    study = study_of(trials)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importance = optuna.importance.FanovaImportanceEvaluator(seed=seed).evaluate(study, params=list(varying))
    return np.array([importance[name] for name in varying])


def _normalised(raw: np.ndarray) -> np.ndarray:
    """Non-negative importances scaled to sum to 1; all 0 when they sum to 0."""
    clipped = np.clip(np.nan_to_num(np.asarray(raw, dtype=float), nan=0.0), 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else clipped


def _spread_over(knobs: Sequence[str], varying: Sequence[str], scores: np.ndarray) -> dict[str, float]:
    """Knob -> importance for every knob: the varying ones' scores, 0 for the rest."""
    by_knob = dict(zip(varying, (float(s) for s in scores)))
    return {k: by_knob.get(k, 0.0) for k in knobs}


def _consensus(knobs: Sequence[str], varying: set[str], scores: Mapping[str, Mapping[str, float]]) -> tuple[str, ...]:
    """Knobs by mean rank over the methods (rank 1 = most important, ties averaged), constant knobs last.

    Ties go to the higher mean importance, then to the name. Without any
    method, the varying knobs come first in the given order.
    """
    if not scores:
        return tuple(sorted(knobs, key=lambda k: k not in varying))
    from scipy import stats as scipy_stats  # loaded when knobs are ranked, not by every command

    ranks = {m: dict(zip(knobs, scipy_stats.rankdata([-imp[k] for k in knobs]))) for m, imp in scores.items()}

    def key(knob: str) -> tuple[bool, float, float, str]:
        mean_rank = sum(r[knob] for r in ranks.values()) / len(ranks)
        mean_importance = sum(imp[knob] for imp in scores.values()) / len(scores)
        return knob not in varying, mean_rank, -mean_importance, knob

    return tuple(sorted(knobs, key=key))


def _agreement(scores: Mapping[str, Mapping[str, float]], varying: Sequence[str]) -> dict[str, float]:
    """Kendall's tau-b between each pair of methods over the varying knobs; undefined pairs left out."""
    agreement: dict[str, float] = {}
    if len(varying) < 2:
        return agreement
    from scipy import stats as scipy_stats

    for a, b in itertools.combinations(scores, 2):
        tau = scipy_stats.kendalltau([scores[a][k] for k in varying], [scores[b][k] for k in varying]).statistic
        if not math.isnan(tau):
            agreement[f"{a}~{b}"] = float(tau)
    return agreement


def _stability(x: np.ndarray, y: np.ndarray, varying: Sequence[str], order: Sequence[str],
               seed: int, bootstrap: int) -> dict[int, float]:
    """For each k in TOP_K below the number of knobs: the share of bootstrap refits whose top k equals ``order``'s.

    A refit's knobs are sorted by its impurity importance, ties (constant
    knobs, unused knobs) in consensus order, so only a real change of the
    top k counts against it.
    """
    ks = [k for k in TOP_K if k < len(order)]
    if bootstrap <= 0 or not ks:
        return {}
    position = {knob: i for i, knob in enumerate(order)}
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(ks, 0)
    for i in range(bootstrap):
        picked = rng.integers(0, len(y), size=len(y))
        refit_forest = _forest(x[picked], y[picked], seed + 1 + i, BOOTSTRAP_TREES)
        importances = dict(zip(varying, refit_forest.feature_importances_))
        refit = sorted(order, key=lambda knob: (-importances.get(knob, 0.0), position[knob]))
        for k in ks:
            hits[k] += set(refit[:k]) == set(order[:k])
    return {k: hits[k] / bootstrap for k in ks}
