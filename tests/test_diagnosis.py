"""Diagnosis rules as data: every shipped rules file loads, a broken one names its field and the fix, rules fire on
counters with their evidence, suggestions narrow the search (nothing run but Optuna in memory)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from knobtune.analysis.diagnosis import Suggestion, diagnose, load_rules
from knobtune.errors import CatalogError
from knobtune.knobs import load_catalog
from knobtune.systems import SYSTEMS
from knobtune.tuning import build_space
from knobtune.tuning.search.guide import counter_meanings, middle, narrowed, rules_of

GIB = 1 << 30
SHAPE = {"point_reads_only": False, "reads": True, "writes": True, "data_bytes": 2 * GIB, "memory_bytes": 24 * GIB,
         "cores": 2, "clients": 8, "key_size": 0, "value_size": 0, "workload_s": 90.0}


def _rocksdb_guide(tmp_path: Path, workload: str, seed: int, trials: int | None, notes: list[str] | None = None):
    """A RocksDB db_bench search space, an in-memory study and the Guide over them (what the trial loop builds)."""
    from knobtune.systems import make_target  # noqa: PLC0415
    from knobtune.tuning.search import Guide  # noqa: PLC0415
    from knobtune.tuning.loop.progress import Reporter  # noqa: PLC0415
    from knobtune.workloads import load_workload  # noqa: PLC0415

    catalog = load_catalog("rocksdb")
    space = build_space(catalog, driver="db_bench")
    target = make_target(catalog, load_workload(workload), tmp_path, "db_bench")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    reporter = Reporter(None if notes is None else lambda event: notes.append(event.message))
    return catalog, space, study, Guide(study, space, target, reporter.note, memory_limit_bytes=None,
                                        trials=trials, enabled=True)


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_every_shipped_rules_file_loads_with_its_sources_and_names_only_known_knobs(system: str) -> None:
    rules = rules_of(system)  # checked against the catalog's knobs and, where it exists, the counters file
    assert rules, f"{system} has no diagnosis rules"
    assert all(rule.source.strip() and rule.finding.strip() for rule in rules)
    meanings = counter_meanings(system)
    assert meanings, f"{system} describes no counter"
    for name, doc in meanings.items():
        assert doc.meaning and doc.unit and doc.read, f"{system} counter {name} lacks meaning, unit or read"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


GOOD = '''
[[rules]]
name = "stalls"
when = "stall_share > 0.1"
finding = "writes stalled {stall_share:.0%} of the run"
source = "a page"
[[rules.suggest]]
knob = "max_background_jobs"
direction = "up"
high = "2 * cores"
'''


@pytest.mark.parametrize(("edit", "message"), [
    (('name = "stalls"\n', ''), "no 'rules #1.name'"),
    (('source = "a page"\n', ''), "no 'rules #1.source'"),
    (('"stall_share > 0.1"', '"stall_share >"'), "cannot parse"),
    (('"stall_share > 0.1"', '"open(stall_share)"'), "calls open"),
    (('"stall_share > 0.1"', '"stal_share > 0.1"'), "stal_share, neither a counter"),
    (('direction = "up"', 'direction = "higher"'), "suggest #1.direction 'higher' is not a direction"),
    (('high = "2 * cores"', 'highest = 4'), "unknown field 'rules #1.suggest #1.highest' (did you mean 'high'?)"),
    (('{stall_share:.0%}', '{stall_share:.0%'), "cannot be formatted"),
])
def test_a_broken_rules_file_names_the_rule_the_field_and_the_fix(tmp_path: Path, edit: tuple[str, str],
                                                                   message: str) -> None:
    assert edit[0] in GOOD
    path = _write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(CatalogError, match="rules.toml") as caught:
        load_rules(path, {"stall_share": {}})
    text = str(caught.value)
    assert message in text and "Fix:" in text and "\n" not in text


def test_a_rule_fires_with_its_evidence_and_a_missing_counter_skips_it_with_the_reason(tmp_path: Path) -> None:
    rules = load_rules(_write(tmp_path, GOOD), {"stall_share": {}})
    found = diagnose(rules, {"stall_share": 0.38}, SHAPE, {})
    [finding] = found.findings
    assert finding.text == "writes stalled 38% of the run" and finding.evidence == {"stall_share": 0.38}
    assert finding.suggest == (Suggestion("max_background_jobs", "up", None, 4),)  # "2 * cores", resolved
    assert not diagnose(rules, {"stall_share": 0.01}, SHAPE, {}).findings
    skipped = diagnose(rules, {}, SHAPE, {})
    assert not skipped.findings and "stall_share" in skipped.skipped["stalls"]


def test_the_postgresql_rules_read_checkpoints_and_backend_writes_at_the_shipped_sizes() -> None:
    catalog = load_catalog("postgresql")
    counters = {"checkpoints_timed": 0, "checkpoints_requested": 3, "wal_bytes": 1.85e9,
                "buffers_written_by_backends": 537944, "buffers_written_by_bgwriter": 40000,
                "buffers_written_by_checkpoints": 300000, "bgwriter_stopped_at_limit": 0, "blocks_hit": 9.47e7,
                "blocks_read": 5.3e6, "cache_hit_ratio": 0.947, "temp_files": 0, "temp_bytes": 0,
                "wal_buffers_full": 0}  # the default's TPC-C run at 10 warehouses (docs/findings.md)
    found = diagnose(rules_of("postgresql"), counters, SHAPE, catalog.defaults())
    assert {"checkpoints-forced-by-wal", "backends-write-buffers", "data-beyond-shared-buffers"} <= found.fired()
    assert "queries-spill-to-temp-files" not in found.fired()
    text = next(f.text for f in found.findings if f.rule == "checkpoints-forced-by-wal")
    assert text.startswith("3 checkpoints were forced by WAL volume") and "GiB of WAL" in text


def test_a_suggestion_narrows_a_numeric_knob_from_its_value_in_its_direction() -> None:
    catalog = load_catalog("rocksdb")
    jobs = catalog["max_background_jobs"]
    assert narrowed(jobs, Suggestion("max_background_jobs", "up", high=4), 2) == (2, 4)
    assert narrowed(jobs, Suggestion("max_background_jobs", "down"), 2) == (1, 2)
    assert narrowed(jobs, Suggestion("max_background_jobs", "up", high=2), 2) is None  # nothing left above
    assert narrowed(catalog["compaction_style"], Suggestion("compaction_style", "to", value="universal"), None) is None
    buffers = catalog["write_buffer_size"]  # log scale: the middle is geometric
    assert middle(buffers, 64 << 20, 1 << 30) == 256 << 20
    pg = load_catalog("postgresql")  # a default that is a special value (-1: auto) narrows from the knob's range
    assert narrowed(pg["wal_buffers"], Suggestion("wal_buffers", "up", low=16 << 20, high=128 << 20), -1) \
        == (16 << 20, 128 << 20)


def test_a_focus_narrows_its_knobs_and_searches_the_rest_over_their_whole_ranges() -> None:
    catalog = load_catalog("rocksdb")
    space = build_space(catalog, driver="db_bench")
    focus = {"max_background_jobs": (2.0, 4.0), "write_buffer_size": (float(64 << 20), float(1 << 30))}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=4, multivariate=True,
                                                                   group=True))
    others = set()
    for _ in range(10):
        trial = study.ask()
        config, _ = space.suggest(trial, focus)
        others |= set(catalog.changed(config)) - set(focus)
        assert 2 <= config["max_background_jobs"] <= 4 and 64 << 20 <= config["write_buffer_size"] <= 1 << 30
        study.tell(trial, float(config["max_background_jobs"]))
    assert len(others) > 10  # the rest were searched
    trial = study.ask()  # then the whole space, in the same study: Optuna takes the wider ranges
    config, _ = space.suggest(trial)
    assert len(catalog.changed(config)) > len(focus)


def test_a_focus_stays_within_the_planned_memory_limit_or_leaves_the_knob_out() -> None:
    """Capped at the default's own plan (a production ratio), a cache the rules would grow has no room while the
    write buffers keep their defaults: it is left out of the focus (said once), not searched to be scaled back to
    the default every time; with room, its range stops where the plan fits."""
    from knobtune.tuning.search import Advice  # noqa: PLC0415
    from knobtune.analysis.diagnosis import Finding  # noqa: PLC0415

    catalog = load_catalog("rocksdb")
    space = build_space(catalog, driver="db_bench")
    grow = Finding(rule="cache", text="", evidence={}, suggest=(Suggestion("cache_size", "up"),), starts=(),
                   source="")
    defaults, plan = catalog.defaults(), catalog.memory.planned_bytes(catalog.defaults())
    notes: list[str] = []
    tight = Advice(space, plan, notes.append)
    assert tight.ranges([grow], defaults) == {} and tight.ranges([grow], defaults) == {}
    assert len(notes) == 1 and notes[0].startswith("cache_size is not searched first: the planned-memory limit")
    roomy = Advice(space, plan + (64 << 20), notes.append)
    assert roomy.ranges([grow],
                        defaults) == {"cache_size": (defaults["cache_size"], defaults["cache_size"] + (64 << 20))}
    assert Advice(space, None, notes.append).ranges([grow], defaults)["cache_size"][1] == catalog["cache_size"].max


def _tiny_leveldb_study(store, *, use_rules: bool, trials: int) -> optuna.Study:
    """A real LevelDB study of point reads over 12,000 records (beyond the default's 8 MiB block cache, no
    bloom filter: two rules fire on its default), random sampling, no verification."""
    from knobtune.tuning import Experiment, Tuner  # noqa: PLC0415

    from conftest import tiny

    catalog = load_catalog("leveldb")
    workload = tiny("ycsb-c", 12000)
    experiment = Experiment.of(catalog, workload, build_space(catalog, driver="kvbench"),
                               study="guided" if use_rules else "alone", driver="kvbench", search__sampler="random",
                               search__seed=3, budget__trials=trials, proof__verify_top=0, proof__repeats=0,
                               measurement__control_every=0, research__rules=use_rules,
                               research__try_known_configs=False)
    return Tuner(experiment, store).run()


@pytest.mark.slow
def test_a_study_starts_from_what_fires_on_the_default_and_searches_its_knobs_narrowed_first(store) -> None:
    """A real tiny LevelDB study: the default's run fires the rules on its shape (the data beyond the 8 MiB block
    cache; point reads without a filter), their suggestions are queued as one start, and the first sampled
    trials search the suggested numeric knob (the block cache) within its narrowed range, every other knob over
    its own."""
    from knobtune.tuning import attrs

    study = _tiny_leveldb_study(store, use_rules=True, trials=4)
    story = study.user_attrs[attrs.DIAGNOSIS]
    assert {"data-beyond-block-cache", "point-reads-without-bloom-filter"} <= set(story["fired"])
    assert story["shape"]["point_reads_only"] is True and story["until_trials"] == 3
    low, high = story["focus"]["block_cache_size"]
    assert low == story["shape"]["data_bytes"] and high > low  # from where the rule stops firing
    [start] = [t for t in study.trials if attrs.STARTED_FROM in t.user_attrs]
    assert start.user_attrs[attrs.STARTED_FROM].startswith("rules: ")
    assert start.user_attrs[attrs.CONFIG]["bloom_bits"] == 10
    assert start.user_attrs[attrs.CONFIG]["block_cache_size"] > low
    focused = [t for t in study.trials if attrs.FOCUSED in t.user_attrs]
    assert len(focused) == 3 and all(t.user_attrs[attrs.FOCUSED] == ["block_cache_size"] for t in focused)
    for trial in focused:
        assert low <= trial.user_attrs[attrs.CONFIG].get("block_cache_size", low) <= high
    assert any(set(t.user_attrs[attrs.CONFIG]) - {"block_cache_size"} for t in focused)  # the rest searched too
    assert all(attrs.FINDINGS in t.user_attrs for t in study.trials if t.user_attrs.get(attrs.REACHED_RUNG) == 2)
    from knobtune.report import summarize  # noqa: PLC0415
    narrowed = summarize(study, load_catalog("leveldb")).bottleneck.diagnosis["narrowed"]
    assert narrowed == [{"knobs": ["block_cache_size"], "trials": 3}]


@pytest.mark.slow
def test_a_study_searched_without_the_rules_says_its_default_was_not_diagnosed(store) -> None:
    """`research.rules = false` never takes the workload's shape the rules read, so `show` must not claim that no
    rule fired on the default (it did: the same default fires two rules in the guided study above); it says they
    were not read."""
    from knobtune.report import summarize  # noqa: PLC0415
    from knobtune.report.summary_text import diagnosis_lines  # noqa: PLC0415
    from knobtune.tuning import attrs  # noqa: PLC0415

    study = _tiny_leveldb_study(store, use_rules=False, trials=2)
    assert attrs.DIAGNOSIS not in study.user_attrs
    diagnosis = summarize(study, load_catalog("leveldb")).bottleneck.diagnosis
    assert diagnosis == {"unread": True}
    [line] = diagnosis_lines(diagnosis)
    assert line.startswith("the default's bottleneck: not read") and "research.rules = false" in line
    assert "fired" not in line


def test_show_says_what_the_result_changed_about_the_default_s_findings() -> None:
    from knobtune.report.summary_text import diagnosis_lines

    story = {"default": [{"rule": "write-stalls-memtables", "finding": "writes stalled 2% of the run"},
                         {"rule": "point-lookups-in-memory", "finding": "the workload reads single keys"}],
             "result": {"gone": ["write-stalls-memtables"], "still": ["point-lookups-in-memory"], "new": [],
                        "evidence": {"write-stalls-memtables": {"stall_share": [0.0201, 0.0]},
                                     "point-lookups-in-memory": {"data_bytes": [1e9, 1e9]}}},
             "guided": True, "narrowed": [{"knobs": ["cache_size"], "trials": 40},
                                          {"knobs": ["cache_size", "max_write_buffer_number"], "trials": 12}]}
    lines = diagnosis_lines(story)
    assert ("  narrowed first: 40 trial(s) searched cache_size within the rules' ranges, every other knob over its "
            "whole range") in lines
    assert any(line.startswith("  narrowed first: 12 trial(s) searched cache_size, max_write_buffer_number within")
               for line in lines)
    assert "  the result: write-stalls-memtables no longer fires (stall_share 0.0201 -> 0)" in lines
    assert not any("point-lookups-in-memory still fires" in line for line in lines)  # the shape's: every config
    assert lines[-1].startswith("the search started from these findings")


def test_show_names_the_knob_the_result_moved_for_a_rule_that_reads_the_config() -> None:
    """A rule that fires on the config (no bloom filter), not a counter, has no evidence to move: `show` names the
    knob its suggestion moved instead of "its evidence unchanged"."""
    from knobtune.report.summary_text import diagnosis_lines  # noqa: PLC0415
    from knobtune.tuning.search import compare_findings, rules_of  # noqa: PLC0415
    from knobtune.tuning.records import RungRun  # noqa: PLC0415

    catalog = load_catalog("rocksdb")
    run = RungRun(value=10.0, summary={"counters": {}})
    default = catalog.config({"bloom_bits": 0})
    story = compare_findings(rules_of("rocksdb"), {"point_reads_only": True}, (run, default),
                             (run, catalog.config({"bloom_bits": 10, "cache_size": 64 << 20})))
    assert story["result"]["gone"] == ["point-reads-without-bloom-filter"]
    assert story["result"]["moved"] == {"point-reads-without-bloom-filter": {"bloom_bits": [0, 10]}}
    lines = diagnosis_lines({**story, "guided": True})
    assert "  the result: point-reads-without-bloom-filter no longer fires (moved bloom_bits 0 -> 10)" in lines


def test_a_second_bottleneck_joins_the_narrowed_search_from_the_config_that_showed_it(tmp_path) -> None:
    """The rules read again over a searched config's full-size run: a rule that fires there for the first time
    queues that config with its suggestions, and while the first third lasts its knobs join the narrowed ranges,
    narrowed from that config's values; every other knob is still searched over its whole range (searched alone
    at the default's values, a fillrandom study had run 518 of 583 trials on one knob of 4 values)."""
    import time  # noqa: PLC0415

    from knobtune.tuning import attrs  # noqa: PLC0415
    from knobtune.tuning.records import RungRun  # noqa: PLC0415

    notes: list[str] = []
    catalog, space, study, guide = _rocksdb_guide(tmp_path, "fillrandom", seed=2, trials=None, notes=notes)
    default = catalog.defaults()
    guide.after_full_run(study.ask(), RungRun(value=10.0, summary={"counters": {}}), default, is_default=True,
                         search_end=time.time() + 600)
    assert guide.focus() is None  # only the shape's rule fired (a start, no numeric knob to narrow)

    searched = {**default, "memtablerep": "vector", "allow_concurrent_memtable_write": False,
                "write_buffer_size": 300 << 20, "max_write_buffer_number": 3, "max_background_jobs": 2}
    trial = study.ask()
    stalled = RungRun(value=6.0, summary={"counters": {"stall_share": 0.2, "stalls_memtable": 7.0}})
    [(label, composed)] = guide.after_full_run(trial, stalled, searched, is_default=False, search_end=None)
    assert label == f"rules after trial {trial.number}: write-stalls-memtables"
    assert composed["memtablerep"] == "vector" and composed["max_write_buffer_number"] > 3
    focus = guide.focus()
    assert focus == {"max_write_buffer_number": (3.0, 8.0), "max_background_jobs": (2.0, 4.0)}
    assert any(n.startswith(f"narrowed from trial {trial.number}'s values") for n in notes)
    configs = [space.suggest(study.ask(), focus, capped=True)[0] for _ in range(8)]
    for config in configs:
        assert 3 <= config["max_write_buffer_number"] <= 8 and 2 <= config["max_background_jobs"] <= 4
    assert len({config["write_buffer_size"] for config in configs}) > 1  # the rest searched, not held
    assert study.user_attrs[attrs.DIAGNOSIS]["fired"][-1] == "write-stalls-memtables"
    assert guide.after_full_run(study.ask(), stalled, searched, is_default=False, search_end=None) == []  # once


@pytest.mark.parametrize(("workload", "narrowed_by_default"), [("readwhilewriting", True), ("fillrandom", False)])
def test_the_narrowed_search_ends_with_its_third_and_a_later_bottleneck_narrows_nothing(
        tmp_path, workload: str, narrowed_by_default: bool) -> None:
    """With --trials the narrowed search lasts a third of the sampled trials, whether or not the default's run
    narrowed anything; a rule that first fires after that still queues its composed start but narrows nothing."""
    from knobtune.tuning import attrs  # noqa: PLC0415
    from knobtune.tuning.records import RungRun  # noqa: PLC0415

    catalog, space, study, guide = _rocksdb_guide(tmp_path, workload, seed=5, trials=9)
    guide.after_full_run(study.ask(), RungRun(value=10.0, summary={"counters": {}}), catalog.defaults(),
                         is_default=True, search_end=None)
    focus = guide.focus()
    assert (focus is not None and "cache_size" in focus) is narrowed_by_default
    for _ in range(3):  # a third of 9, sampled as the trial loop does (a start in between does not count)
        assert guide.focus() == focus
        study.enqueue_trial({}, user_attrs={attrs.STARTED_FROM: "a start"})
        study.ask().set_user_attr(attrs.CONFIG, {})
        trial = study.ask()
        config, _ = space.suggest(trial, focus, capped=True)
        trial.set_user_attr(attrs.CONFIG, catalog.changed(config))
        if focus is not None:
            assert focus["cache_size"][0] <= config["cache_size"] <= focus["cache_size"][1]
    assert guide.focus() is None
    stalled = RungRun(value=6.0, summary={"counters": {"stall_share": 0.2, "stalls_memtable": 7.0}})
    assert guide.after_full_run(study.ask(), stalled, catalog.defaults(), is_default=False, search_end=None)
    assert guide.focus() is None


def test_a_narrowed_trial_queued_again_runs_the_config_it_ran() -> None:
    """A narrowed trial's params hold every knob it searched (the narrowed ones and the rest), so an interrupted
    one queued again from its params runs the same config."""
    from types import SimpleNamespace  # noqa: PLC0415

    from knobtune.tuning import attrs  # noqa: PLC0415
    from knobtune.tuning.loop.progress import Reporter  # noqa: PLC0415
    from knobtune.tuning.loop.resume import Queue  # noqa: PLC0415

    catalog = load_catalog("rocksdb")
    space = build_space(catalog, driver="db_bench")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=4))
    trial = study.ask()
    config, _ = space.suggest(trial, {"max_write_buffer_number": (3.0, 8.0)}, capped=True)
    ran = catalog.changed(config)
    queue = Queue(SimpleNamespace(experiment=SimpleNamespace(space=space, catalog=catalog), study=study),
                  Reporter(None))
    queue.requeue(trial.params, {attrs.FOCUSED: ["max_write_buffer_number"]}, trial.number)
    again, _ = space.suggest(study.ask())
    assert catalog.changed(again) == ran
