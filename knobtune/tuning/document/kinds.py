"""What a study given by name must be for the command that reads it: of the system the command runs, and a tuning
study (a result to export, explain, compare or start from) or a knob ranking (``--ranking``) as the use needs.
Each refusal is one line naming the study, what it is, and the fix."""

from __future__ import annotations

import optuna

from knobtune.errors import UsageError
from knobtune.tuning.records import attrs


def of_system(study: optuna.Study, system: str, use: str) -> optuna.Study:
    """``study`` when it ran ``system``; ``use`` names how it is given (``--start-from``, ``--config study:X``).

    Raises:
        UsageError: it ran another system.
    """
    ran = study.user_attrs.get(attrs.SYSTEM)
    if ran is not None and ran != system:
        raise UsageError(f"{use}: study '{study.study_name}' is of {ran}, not {system}. Fix: give a {system} study "
                         f"(`knobtune show NAME` says which system a study is of)")
    return study


def tuning_study(study: optuna.Study, use: str) -> optuna.Study:
    """``study`` when it is a tuning study (made by ``knobtune tune``); ``use`` says what is done with its result
    (``export``, ``explain``, ``--start-from``).

    Raises:
        UsageError: it is a knob ranking, which has samples and no result.
    """
    if attrs.is_ranking(study.user_attrs):
        name = study.study_name
        raise UsageError(f"{use}: study '{name}' is a knob ranking (`knobtune rank`), not a tuning study: its samples "
                         f"have no verified result. Fix: give a study made by `knobtune tune`; a ranking is used as "
                         f"`knobtune tune SYSTEM --ranking {name} --top-k K`")
    return study
