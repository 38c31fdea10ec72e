"""A study written by an earlier release opens, shows, resumes and reads back its experiment.

``corpus/studies/release-e064aba.db`` was written by knobtune at commit e064aba (before the typed records):
`knobtune tune rocksdb --workload put-get-delete --records 3000 --trials 4 --verify-top 1 --repeats 2
--study old-release`. Its verification kept the default.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knobtune.report import summarize
from knobtune.storage import StudyStore, open_store
from knobtune.tuning import Tuner, attrs
from knobtune.tuning.document import read_experiment, stored_document
from knobtune.tuning.records import records, winner_trial

from conftest import CORPUS

OLD = CORPUS / "studies" / "release-e064aba.db"


@pytest.fixture()
def old_store(tmp_path: Path) -> StudyStore:
    shutil.copy(OLD, tmp_path / "studies.db")
    return open_store(tmp_path)


def test_it_shows_as_it_did(old_store: StudyStore) -> None:
    summary = summarize(old_store.load("old-release"))
    assert summary.system == "rocksdb" and summary.heading.workload == "put-get-delete"
    assert summary.default.default_value is not None and summary.result_trial is None
    assert summary.verdict.startswith("no significant gain") and "keep the default" in summary.verdict
    assert sum(summary.trials.counts.values()) == 4


def test_its_trials_read_as_typed_records(old_store: StudyStore) -> None:
    study = old_store.load("old-release")
    typed = records(study)
    assert typed[0].is_default and typed[0].run_at(2) is not None and typed[0].run_at(2).ok
    assert typed[0].run_at(2).elapsed_s > 0 and typed[0].run_at(2).recovery_s is not None
    assert {r.started_from for r in typed[1:] if r.started_from} >= {"rocksdb-guide"}
    assert all(r.outcome is not None for r in typed)


def test_its_experiment_reads_back_and_it_resumes(old_store: StudyStore) -> None:
    study = old_store.load("old-release")
    experiment = read_experiment(study)
    assert (experiment.catalog.system, experiment.driver, experiment.workload.records) == ("rocksdb", "db_bench", 3000)
    assert experiment.objective.value == study.user_attrs["objective"] and experiment.research.settle
    # written on another machine: this one's kernel (or more) differs, which alone refuses a resume without the flag
    more = experiment.changed(budget__trials=5, proof__verify_top=0, search__sampler="random",
                              placement__allow_mixed_machines=True)
    resumed = Tuner(more, old_store).run()
    assert len([r for r in records(resumed) if not r.is_default]) == 5  # one more sampled trial, none lost
    assert resumed.user_attrs[attrs.EXPERIMENT]["budget"]["trials"] == 5  # a resume writes the document
    assert stored_document(resumed.user_attrs, "old-release").workload.records == 3000
    assert summarize(resumed).system == "rocksdb"


def test_its_flat_spelling_reads_as_one_document(old_store: StudyStore) -> None:
    """Written before the document: ``system``, ``driver``, ``objective``, ``seed``, ``settled``, ``settings`` ...
    read by the one reader of the old spelling into the sections of today's."""
    study = old_store.load("old-release")
    assert attrs.EXPERIMENT not in study.user_attrs
    doc = stored_document(study.user_attrs, "old-release")
    assert (doc.system, doc.workload.name, doc.workload.records, doc.workload.driver, doc.workload.objective) == \
        ("rocksdb", "put-get-delete", 3000, "db_bench", "elapsed_s")
    assert (doc.search.sampler, doc.search.seed, doc.budget.trials, doc.budget.time_s) == ("tpe", 42, 4, None)
    assert (doc.proof.verify_top, doc.proof.repeats, doc.measurement.control_every) == (1, 2, 10)
    assert doc.research.settle and doc.research.scale_rungs and not doc.research.rules  # it read no rules
    assert doc.limits.memory_limit_bytes is None and not doc.search.allow_unsafe


def test_its_default_stored_as_baseline_reads_as_the_default(old_store: StudyStore) -> None:
    study = old_store.load("old-release")
    assert study.trials[0].user_attrs[attrs.ROLE] == attrs.OLD_ROLE_DEFAULT == "baseline"
    assert attrs.role_of(study.trials[0].user_attrs) == attrs.ROLE_DEFAULT == "default"
    assert records(study)[0].role == "default" and records(study)[0].is_default


def test_its_defaults_by_rung_stored_as_baseline_read_under_todays_names(old_store: StudyStore) -> None:
    """Up to 0.3.0 the default's runs by rung were the study key ``baseline`` and their machine ``baseline_machine``:
    one reader of each (``attrs.default_by_rung``, ``attrs.units_machine``) reads them for every command."""
    from knobtune.report.report_data import report_data

    study = old_store.load("old-release")
    user = study.user_attrs
    assert attrs.DEFAULT_BY_RUNG not in user and attrs.UNITS_MACHINE not in user
    assert (attrs.OLD_DEFAULT_BY_RUNG, attrs.OLD_UNITS_MACHINE) == ("baseline", "baseline_machine")
    assert sorted(attrs.default_by_rung(user)) == ["0", "1", "2"] == sorted(user["baseline"])
    assert attrs.units_machine(user) == user["baseline_machine"] == "vm"
    assert summarize(study).default.units_machine == "vm"
    shown = report_data(study)["defaults_by_rung"]
    assert shown == {rung: run["value"] for rung, run in user["baseline"].items()}


def test_a_study_of_todays_code_stores_them_under_their_own_names(tmp_path: Path) -> None:
    """Written by today's code, the new keys only; they read back through the same readers."""
    from knobtune.knobs import load_catalog
    from knobtune.tuning.document import Experiment
    from knobtune.workloads import load_workload

    store = open_store(tmp_path)
    experiment = Experiment.of(load_catalog("rocksdb"), load_workload("fillrandom").scaled(2000), study="new-keys",
                               budget__trials=1, proof__verify_top=0)
    user = Tuner(experiment, store).run().user_attrs
    assert attrs.OLD_DEFAULT_BY_RUNG not in user and attrs.OLD_UNITS_MACHINE not in user
    assert sorted(user[attrs.DEFAULT_BY_RUNG]) == sorted(attrs.default_by_rung(user)) == ["0", "1", "2"]
    assert user[attrs.UNITS_MACHINE] == attrs.units_machine(user) is not None


def test_a_winner_stored_by_its_label_reads_as_its_trial_number(old_store: StudyStore) -> None:
    study = old_store.load("old-release")
    assert winner_trial(study) is None  # it kept the default
    verification = dict(study.user_attrs[attrs.VERIFICATION], winner="trial 2")  # as a winning release stored it
    study.set_user_attr(attrs.VERIFICATION, verification)
    assert winner_trial(study) == 2
    assert summarize(study).result_trial == 2


def test_show_leads_with_the_verdict_and_labels_single_runs(old_store: StudyStore,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The verified figure first; the default's and the result's single runs come after it, said as single runs."""
    from knobtune.cli import run

    assert run(["show", "old-release", "--dir", str(old_store.home)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("study old-release") and lines[1].startswith("verdict: no significant gain")
    assert sum(line.startswith("verdict:") for line in lines) == 1
    assert any(line.startswith("default: ") and "one run at full size" in line for line in lines)
