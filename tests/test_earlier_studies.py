"""A new study learns from earlier studies alike in its storage: same system, a machine of the same kind with the
same build, a workload of a similar shape; their best configs go first, and TPE is shown their trials. Off with
--no-earlier-studies; never from a study of another shape, build or kind."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import cast

import optuna
import pytest
from typer.testing import CliRunner

from knobtune.cli import app
from knobtune.tuning import attrs
from knobtune.tuning.loop.earlier import distance, stored_shape
from knobtune.tuning.loop.progress import Reporter
from knobtune.tuning.loop.resume import Queue
from knobtune.tuning.loop.workers import Workers
from knobtune.tuning.search import composed_here

runner = CliRunner()
GiB = 1024**3


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _shape(**changed: object) -> dict:
    shape = {"point_reads_only": True, "scans": False, "reads": True, "writes": True, "data_bytes": GiB,
             "memory_bytes": 16 * GiB, "cores": 2, "clients": 1, "key_size": 16, "value_size": 100}
    return stored_shape({**shape, **changed})


def test_workloads_are_alike_when_they_read_write_and_scan_alike_and_their_sizes_are_near() -> None:
    mine = _shape()
    assert distance(mine, mine) == 0
    assert 0 < distance(mine, _shape(value_size=180)) < distance(mine, _shape(value_size=60, key_size=24))
    assert distance(mine, _shape(data_bytes=2 * GiB)) is not None  # both fit in memory, within 4x
    assert distance(mine, _shape(value_size=1000)) is None  # 10x larger values
    assert distance(mine, _shape(scans=True, point_reads_only=False)) is None
    assert distance(mine, _shape(reads=False, point_reads_only=False)) is None  # writes only
    assert distance(mine, _shape(clients=8)) is None
    assert distance(_shape(data_bytes=12 * GiB), _shape(data_bytes=20 * GiB)) is None  # one fits, one does not
    assert "cores" not in mine and "memory_bytes" not in mine  # the machine is compared as a machine, apart


def _tune(home: str, study: str, workload: str, records: str, *more: str, known: bool = False,
          sampler: str = "random", trials: int = 4, rules: bool = False) -> str:
    """A short study; without the system's known configs unless ``known`` (the RocksDB guide's config is never
    pruned, so a study that tries it has a complete config to learn from), without the rules' starts unless
    ``rules``."""
    experiment = Path(home).parent / f"{study}.toml"
    experiment.write_text(f'system = "rocksdb"\n[workload]\nname = "{workload}"\n[research]\n'
                          f'try_known_configs = {str(known).lower()}\n')
    return _ok("tune", "--experiment", str(experiment), "--records", records, "--trials", str(trials), "--study", study,
               "--dir", home, "--sampler", sampler, "--verify-top", "0", "--no-warm-up",
               *([] if rules else ["--no-rules"]), "--timeout-factor", "20", *more)


def _started_from(home: str, study: str) -> list[str]:
    """The labels of the configs ``study`` tried first from earlier studies (not the system's known configs), as
    they are or as the start they were there, sized for this workload (``in_place_of``)."""
    loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{home}/studies.db")
    return [label for t in loaded.trials
            if (label := t.user_attrs.get(attrs.IN_PLACE_OF) or t.user_attrs.get(attrs.STARTED_FROM, ""))
            .startswith("earlier")]


def test_a_new_study_tries_the_best_configs_of_an_earlier_study_alike_first_and_only_those(tmp_path: Path) -> None:
    """... and TPE (the default sampler) is shown the earlier study's trials, which stay that study's own."""
    home = str(tmp_path / "studies")
    _tune(home, "first", "put-get-delete", "3000", known=True, sampler="tpe")
    first = optuna.load_study(study_name="first", storage=f"sqlite:///{home}/studies.db")
    theirs = [t for t in first.trials if t.state.name in ("COMPLETE", "PRUNED") and not attrs.is_default(t.user_attrs)]
    # the same shape, a little more data; beyond the default and up to 3 earlier configs, sampled ones
    said = _tune(home, "second", "put-get-delete", "4000", sampler="tpe", trials=6)
    assert "started from 1 earlier study of a workload alike (first)" in said, said
    assert f"go first, and the sampler learns from their {len(theirs)} trials" in said, said
    tried = _started_from(home, "second")
    assert tried and all(label.startswith("earlier study first trial ") for label in tried)
    assert int(tried[0].rsplit(" ", 1)[1]) in [t.number for t in first.trials if t.state.name == "COMPLETE"]
    second = optuna.load_study(study_name="second", storage=f"sqlite:///{home}/studies.db")
    # its own trials only: the default and the 6 configs of --trials, numbered from 0, none of the earlier ones
    assert [t.number for t in second.trials] == list(range(len(second.trials)))
    assert sum(not attrs.is_default(t.user_attrs) for t in second.trials) == 6
    shown = json.loads(_ok("show", "second", "--dir", home, "--json"))
    assert shown["earlier_studies"] == ["first"] and shown["earlier_trials"] == len(theirs) > 0
    # how each config tried first from it ran here, in the order tried: its full-size speedup over this default
    ran = [t for t in second.trials if attrs.from_earlier(t.user_attrs)]
    assert len(shown["earlier_gains"]) == len(ran) == len(tried)
    for trial, gain in zip(ran, shown["earlier_gains"]):  # the default's full-size time over the config's here
        assert gain is None if trial.state.name != "COMPLETE" else gain == pytest.approx(
            shown["default_value"] / trial.value, rel=1e-3)
    here = ", ".join(f"{g:.2f}x" if g is not None else "not complete" for g in shown["earlier_gains"])
    here = " and ".join(here.rsplit(", ", 1))
    assert (f"started from 1 earlier study of a workload alike: first (their best configs tried first, here {here} "
            f"the default; the sampler shown their {len(theirs)} trials)") in _ok("show", "second", "--dir", home)

    _tune(home, "off", "put-get-delete", "4000", "--no-earlier-studies")
    assert _started_from(home, "off") == []
    assert json.loads(_ok("show", "off", "--dir", home, "--json"))["earlier_studies"] == []

    said = _tune(home, "writes-only", "fillrandom", "4000")  # another shape: it never reads
    assert "earlier stud" not in said and _started_from(home, "writes-only") == []


def test_a_study_of_another_build_or_a_ranking_is_never_learned_from(tmp_path: Path) -> None:
    home = str(tmp_path / "studies")
    _tune(home, "old-build", "put-get-delete", "3000", known=True)
    storage = optuna.storages.RDBStorage(f"sqlite:///{home}/studies.db")
    old = optuna.load_study(study_name="old-build", storage=storage)
    old.set_user_attr(attrs.MACHINE, {**old.user_attrs[attrs.MACHINE], "system_version": "RocksDB 7.0.0 (debug)"})
    _ok("rank", "rocksdb", "--workload", "put-get-delete", "--records", "3000", "--samples", "8", "--study",
        "ranking", "--dir", home)
    said = _tune(home, "new", "put-get-delete", "3000")
    assert "earlier stud" not in said and _started_from(home, "new") == []


def test_a_known_config_the_earlier_study_alike_ran_without_a_gain_is_not_tried_first_again(tmp_path: Path) -> None:
    """The known configs an earlier study alike ran without a gain are not worth a full-size run before the search;
    those that gained there go again (its best configs are fit to its workload, a known config is not), and without
    the earlier study they all go first as always. The rules' starts read this study's own runs and always go."""
    home = str(tmp_path / "studies")

    def known_tried(study: str, where: str = home) -> set[str]:
        """Known configs and rules' starts ``study`` tried first as such, not in an earlier config's place."""
        loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{where}/studies.db")
        return {label for t in loaded.trials if (label := t.user_attrs.get(attrs.STARTED_FROM, ""))
                and not label.startswith("earlier") and attrs.IN_PLACE_OF not in t.user_attrs
                and t.state.name in ("COMPLETE", "PRUNED")}

    def rules(labels: set[str]) -> set[str]:
        return {label for label in labels if composed_here(label)}

    def left_out(said: str) -> set[str]:
        """What the output says was not tried first (the known configs, then those a rule names, each its line)."""
        return {label for line in said.splitlines() if "not tried first" in line
                for label in line.split("without a gain: ", 1)[1].split(", ")}

    _tune(home, "first", "put-get-delete", "3000", known=True, rules=True, trials=6)
    theirs = known_tried("first")
    known = theirs - rules(theirs)
    assert len(known) > 3, "the first study tried more of the guide's configs than its 3 best"
    from_default = {label for label in theirs if label.startswith("rules: ")}
    assert from_default, "the rules fired on the first study's default run"
    # at 3,000 records a config's gain is noise: two known configs are stored as the slowest the first study ran
    # (so neither is among its 3 best), one slower than its default and one faster, every other config as faster
    first = optuna.load_study(study_name="first", storage=f"sqlite:///{home}/studies.db")
    assert first.direction == optuna.study.StudyDirection.MINIMIZE
    ran = {t.user_attrs[attrs.STARTED_FROM] for t in first.trials
           if t.user_attrs.get(attrs.STARTED_FROM) in known and t.state.name == "COMPLETE"}
    lost, gained = sorted(ran)[:2]
    for trial in first.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        if not attrs.is_default(trial.user_attrs):
            _store_as(home, trial.number, {lost: 1.2, gained: 0.9}.get(trial.user_attrs.get(attrs.STARTED_FROM), 0.5))
    said = _tune(home, "second", "put-get-delete", "4000", known=True, rules=True, trials=6)
    assert left_out(said) == {lost} | (known - ran), said  # and any that did not complete there
    assert lost not in known_tried("second")
    assert from_default <= rules(known_tried("second")) | _in_place(home, "second"), \
        "the rules' start from the default's run goes, though the earlier study ran its own"
    assert len(_started_from(home, "second")) == 3, "the earlier study's 3 best configs are still tried first"
    # a third learns from both; the configs it chose to try first go first, though the second study tried them too
    said = _tune(home, "third", "put-get-delete", "5000", known=True, rules=True)
    assert lost in left_out(said) and not any(label.startswith("earlier study") for label in left_out(said)), said
    cold = str(tmp_path / "cold")
    _tune(cold, "cold", "put-get-delete", "4000", "--no-earlier-studies", known=True, rules=True, trials=6)
    assert known <= known_tried("cold", cold)


def _store_as(home: str, number: int, times_default: float) -> None:
    """Stores trial ``number`` of the study "first" as having taken ``times_default`` its default's time at every
    rung it ran (its value, and its ratio to the default), as if it had measured that."""
    with sqlite3.connect(f"{home}/studies.db") as db:
        def one(sql: str, *args: object) -> object:
            return db.execute("SELECT " + sql + " FROM trials t JOIN studies s ON t.study_id = s.study_id "
                              "JOIN trial_values v ON v.trial_id = t.trial_id WHERE s.study_name = 'first' "
                              "AND t.number = ?", args).fetchone()[0]

        trial, default = one("t.trial_id", number), cast(float, one("v.value", 0))
        db.execute("UPDATE trial_values SET value = ? WHERE trial_id = ?", (default * times_default, trial))
        for row, value in db.execute("SELECT trial_user_attribute_id, value_json FROM trial_user_attributes "
                                     "WHERE trial_id = ? AND key LIKE ?", (trial, attrs.RUNG_PREFIX + "%")).fetchall():
            db.execute("UPDATE trial_user_attributes SET value_json = ? WHERE trial_user_attribute_id = ?",
                       (json.dumps({**json.loads(value), "ratio": 1 / times_default}), row))


def _in_place(home: str, study: str) -> set[str]:
    """The starts ``study`` tried in an earlier config's place (its own version of the start that config was)."""
    loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{home}/studies.db")
    return {t.user_attrs[attrs.STARTED_FROM] for t in loaded.trials if attrs.IN_PLACE_OF in t.user_attrs}


def test_an_earlier_config_that_was_a_start_is_tried_as_the_start_sized_for_this_workload(tmp_path: Path) -> None:
    """A rule sizes its start for the workload (a hash memtable 0.4 of the data set): an earlier study's best
    config that was such a start is tried as this study composes the same start, in its place, not with the sizes
    of the earlier workload."""
    home, cold = str(tmp_path / "studies"), str(tmp_path / "cold")

    def tried(where: str, study: str) -> list[optuna.trial.FrozenTrial]:
        loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{where}/studies.db")
        return [t for t in loaded.trials if attrs.STARTED_FROM in t.user_attrs]

    _tune(home, "first", "put-get-delete", "12000", known=True, rules=True, trials=3)
    said = _tune(home, "second", "put-get-delete", "18000", known=True, rules=True, trials=3)
    _tune(cold, "cold", "put-get-delete", "18000", "--no-earlier-studies", known=True, rules=True, trials=6)
    first = {t.number: t for t in tried(home, "first")}
    own = {t.user_attrs[attrs.STARTED_FROM]: t.user_attrs[attrs.CONFIG] for t in tried(cold, "cold")}
    in_place = [t for t in tried(home, "second") if attrs.IN_PLACE_OF in t.user_attrs]
    assert in_place, said
    resized = 0
    for trial in in_place:
        earlier = first[int(trial.user_attrs[attrs.IN_PLACE_OF].rsplit(" ", 1)[1])]
        start = trial.user_attrs[attrs.STARTED_FROM]
        assert start == earlier.user_attrs[attrs.STARTED_FROM]  # the same start ...
        assert trial.user_attrs[attrs.CONFIG] == own[start]  # ... as a study of this workload composes it
        assert f"queued first: {start}, sized for this workload, in place of {trial.user_attrs[attrs.IN_PLACE_OF]}" \
            in said, said
        resized += trial.user_attrs[attrs.CONFIG] != earlier.user_attrs[attrs.CONFIG]
    assert resized, "a start sized by the data set (the hash memtable's buffers) differs at 12,000 and 18,000 records"


def test_the_rules_composed_start_goes_though_an_earlier_study_ran_its_own() -> None:
    """Of the starts the diagnosis suggests, a known config a rule names that an earlier study alike ran is left
    out, and said; the config the rules compose from this study's own run goes, whatever an earlier study's
    composition of the same label measured."""
    said: list[str] = []
    queue = Queue(cast(Workers, None), Reporter(lambda event: said.append(event.message)))
    composed, after = "rules: data-beyond-block-cache+large-values-in-the-tables", "rules after trial 7: write-stalls"
    queue.tried_elsewhere(frozenset({"rocksdb-large-values", composed, after}))
    queue.plan([("rocksdb-large-values", {"enable_blob_files": True}), ("rocksdb-point-lookups", {}),
                (composed, {"cache_size": 1})])
    queue.plan([(after, {"max_write_buffer_number": 4})])
    assert [label for label, _ in queue._pending] == ["rocksdb-point-lookups", composed, after]
    assert said == ["not tried first, the earlier studies alike ran it without a gain: rocksdb-large-values"]
    assert all(composed_here(label) for label in (composed, after)) and not composed_here("rocksdb-large-values")
