"""Which knobs mattered: Optuna's importance evaluators over finished trials.

Pure: takes trial records (Optuna's FrozenTrial is plain data), builds an
in-memory study of them and asks Optuna's evaluator: fANOVA when
scikit-learn is installed (Optuna's fANOVA needs it), PED-ANOVA otherwise
(scipy only; it ranks knobs by how much the top trials' values differ from
the rest). No storage is opened.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

MIN_TRIALS = 5


def knob_importance(trials: Sequence[FrozenTrial], maximize: bool, seed: int = 0) -> dict[str, float] | None:
    """Importance of each param (sums to 1), most important first; None with fewer than MIN_TRIALS complete trials.

    Only params that every complete trial has are ranked (Optuna's intersection
    search space): a knob that matters only under a condition is left out.
    """
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None and t.params]
    if len(complete) < MIN_TRIALS:
        return None
    study = study_of(complete, maximize)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            importance = optuna.importance.get_param_importances(study, evaluator=evaluator(seed))
        except (RuntimeError, ValueError, ZeroDivisionError):  # e.g. no param varies across the trials
            return None
    return dict(importance)


def study_of(trials: Sequence[FrozenTrial], maximize: bool = False) -> optuna.Study:
    """An in-memory Optuna study holding ``trials``, for Optuna's evaluators (its creation message silenced)."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(direction="maximize" if maximize else "minimize")
    finally:
        optuna.logging.set_verbosity(verbosity)
    study.add_trials(trials)
    return study


def evaluator(seed: int = 0) -> optuna.importance.BaseImportanceEvaluator:
    """fANOVA when scikit-learn is installed, else PED-ANOVA."""
    if importlib.util.find_spec("sklearn") is not None:
        return optuna.importance.FanovaImportanceEvaluator(seed=seed)
    return optuna.importance.PedAnovaImportanceEvaluator()


def evaluator_name() -> str:
    return type(evaluator()).__name__.removesuffix("ImportanceEvaluator")
