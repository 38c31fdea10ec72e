"""The samplers offered, and a study searched with one knobtune no longer offers (``forest``, ``local``).

The stored study is ``corpus/studies/release-e064aba.db`` (see test_stored_studies.py) with its recorded sampler
rewritten to ``forest``, as a study of a release that offered it stored it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna
import pytest

from knobtune.errors import UsageError
from knobtune.report import summarize
from knobtune.report.report_data import report_data
from knobtune.storage import StudyStore, open_store
from knobtune.tuning import Tuner, attrs
from knobtune.tuning.document import ExperimentError, join_experiment, load_document, read_experiment, stored_document
from knobtune.tuning.loop import Progress
from knobtune.tuning.records import records
from knobtune.tuning.search import REMOVED_SAMPLERS, SAMPLERS, make_sampler

from conftest import CORPUS

STUDY = "old-release"


@pytest.fixture()
def forest_store(tmp_path: Path) -> StudyStore:
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", tmp_path / "studies.db")
    store = open_store(tmp_path)
    study = store.load(STUDY)
    study.set_user_attr(attrs.OLD_SETTINGS, {**study.user_attrs[attrs.OLD_SETTINGS], "sampler": "forest"})
    return store


def test_each_offered_sampler_is_made_and_no_removed_one_is() -> None:
    assert not set(REMOVED_SAMPLERS) & set(SAMPLERS)
    assert isinstance(make_sampler("tpe", 1, 10), optuna.samplers.TPESampler)
    assert isinstance(make_sampler("random", 1, 10), optuna.samplers.RandomSampler)
    for name in REMOVED_SAMPLERS:
        with pytest.raises(UsageError, match=rf"^the study's sampler '{name}' was removed from knobtune .*"
                                             r"Fix: resume it with --sampler tpe"):
            make_sampler(name, 1, 10)


def test_a_person_asking_for_a_removed_sampler_is_told_it_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "arm.toml"
    path.write_text('system = "rocksdb"\n[workload]\nname = "put-get-delete"\n[search]\nsampler = "forest"\n')
    with pytest.raises(ExperimentError) as error:
        load_document(path)
    assert str(error.value) == (f"{path}: search.sampler 'forest' is not a sampler any more (knobtune removed it: "
                                f"docs/tuning.md). Fix: use one of {', '.join(SAMPLERS)}")


def test_a_study_searched_with_a_removed_sampler_still_shows_and_reports(forest_store: StudyStore) -> None:
    study = forest_store.load(STUDY)
    assert stored_document(study.user_attrs, STUDY).search.sampler == "forest"
    summary = summarize(study)
    assert summary.system == "rocksdb" and sum(summary.trials.counts.values()) == 4
    assert report_data(study)["summary"]["experiment"]["document"]["search"]["sampler"] == "forest"  # the report


def test_a_worker_joining_it_is_told_what_to_use(forest_store: StudyStore) -> None:
    experiment = join_experiment(forest_store, STUDY, allow_mixed_machines=True)
    assert experiment.search.sampler == "forest"
    with pytest.raises(UsageError, match="sampler 'forest' was removed from knobtune"):
        Tuner(experiment, forest_store).run()


def test_a_resume_goes_on_with_the_sampler_given_and_says_so_in_one_line(forest_store: StudyStore) -> None:
    experiment = read_experiment(forest_store.load(STUDY)).changed(
        budget__trials=5, proof__verify_top=0, search__sampler="tpe", placement__allow_mixed_machines=True)
    events: list[Progress] = []
    resumed = Tuner(experiment, forest_store, on_progress=events.append).run()
    notes = [e.message for e in events if e.kind == "note" and "forest" in e.message]
    assert notes == [f"the study was searched with sampler 'forest', which knobtune no longer offers "
                     f"({REMOVED_SAMPLERS['forest']}); it goes on with 'tpe'"]
    assert len([r for r in records(resumed) if not r.is_default]) == 5
    assert resumed.user_attrs[attrs.EXPERIMENT]["search"]["sampler"] == "tpe"
