"""Small real studies on db_bench: the ladder, timeouts, reuse, budgets, the FIFO trap, verification."""

from __future__ import annotations

import dataclasses
import time

import optuna
import pytest
from optuna.trial import TrialState

from knobtune.errors import KnobtuneError, UsageError
from knobtune.report import summarize
from knobtune.tuning import Tuner, Experiment, attrs, build_space
from knobtune.tuning.records import Outcome, record_of

from conftest import tiny

pytestmark = pytest.mark.slow


def _settings(rocksdb, workload, **overrides) -> Experiment:
    values = dict(study="s", space=build_space(rocksdb), search__sampler="random", search__seed=5, budget__trials=6,
                  proof__verify_top=0, proof__repeats=0, measurement__control_every=0, research__rules=False,
                  research__try_known_configs=False)
    return Experiment.of(rocksdb, workload, **(values | overrides))


def _parts(experiment: Experiment, store, on_progress=None, known: tuple[str, ...] = ()):  # noqa: ANN001, ANN202
    """The study of ``experiment`` opened, with its budget and trial runner, as ``Tuner.run`` wires them."""
    from knobtune.tuning.loop.budget import Budget
    from knobtune.tuning.loop.resume import Queue
    from knobtune.tuning.loop.trial import TrialRunner
    from knobtune.tuning.loop.workers import Workers

    tuner = Tuner(experiment, store, on_progress=on_progress)
    storage = store.storage()
    study = tuner._open_study(storage)
    workers = Workers(study, storage, experiment, tuner.reporter)
    budget = Budget(experiment, workers, tuner.reporter, known=known, twins=False, crash_check=False)
    tuner.reporter.time_left_s = budget.time_left_s
    return study, budget, TrialRunner(workers, budget, Queue(workers, tuner.reporter), tuner.reporter, store)


def _outcomes(study: optuna.Study) -> list[str]:
    return [t.user_attrs.get(attrs.OUTCOME) for t in study.trials if not attrs.is_default(t.user_attrs)]


def test_a_small_study_climbs_the_ladder(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 8000)
    events = []
    study = Tuner(_settings(rocksdb, workload, budget__trials=8), store, on_progress=events.append).run()
    baseline = study.trials[0]
    assert baseline.user_attrs[attrs.ROLE] == attrs.ROLE_DEFAULT and baseline.state == TrialState.COMPLETE
    assert sorted(study.user_attrs[attrs.DEFAULT_BY_RUNG]) == ["0", "1", "2"]  # the default at every rung
    assert len(_outcomes(study)) == 8 and all(o in {o.value for o in Outcome} for o in _outcomes(study))
    for trial in study.trials:
        reached = trial.user_attrs.get(attrs.REACHED_RUNG)
        if trial.state == TrialState.COMPLETE:
            assert reached == 2 and all(attrs.rung_key(r) in trial.user_attrs for r in range(3))
        elif trial.user_attrs[attrs.OUTCOME] == Outcome.PRUNED:
            assert reached < 2 and trial.intermediate_values
    assert (tmp := store.artifacts("s") / "trial-0000" / "rung-2.log").exists() and "readrandom" in tmp.read_text()
    assert any(e.kind == "rung" for e in events) and any(e.kind == "trial" for e in events)
    for key in (attrs.TOOL_VERSION, attrs.SYSTEM_VERSION, attrs.MACHINE, attrs.WORKLOAD, attrs.LEFT_OUT):
        assert study.user_attrs[key]


def test_the_first_default_warms_up_once_and_its_controls_do_not(rocksdb, store) -> None:
    events = []
    settings = _settings(rocksdb, tiny("put-get-delete", 4000), budget__trials=2, measurement__control_every=1,
                         search__sampler="random")
    study = Tuner(settings, store, on_progress=events.append).run()
    defaults = [t for t in study.trials if attrs.is_default(t.user_attrs)]
    first, controls = defaults[0], defaults[1:]
    warm = first.user_attrs[attrs.WARM_UP]
    assert warm["value"] > 0 and warm["elapsed_s"] > 0
    assert (store.artifacts("s") / f"trial-{first.number:04d}" / "warm-up.log").exists()
    assert all(attrs.WARM_UP not in t.user_attrs for t in controls)
    assert len(list(store.artifacts("s").glob("trial-*/warm-up.log"))) == 1  # once per study and machine
    notes = [e.message for e in events if e.kind == "note"]
    assert any(n.startswith("warming up: the default once at") for n in notes)
    assert any(n.startswith("the default's warm-up ran") for n in notes)
    assert summarize(study).default.default_warm_up == warm["value"]


def test_no_warm_up_counts_the_first_run(rocksdb, store) -> None:
    study = Tuner(_settings(rocksdb, tiny("put-get-delete", 4000), budget__trials=1, research__warm_up=False),
                  store).run()
    assert attrs.WARM_UP not in study.trials[0].user_attrs
    assert not (store.artifacts("s") / "trial-0000" / "warm-up.log").exists()


def test_a_run_far_slower_than_the_default_times_out(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 4000)
    settings = _settings(rocksdb, workload, budget__trials=2, measurement__timeout_factor=0.01,
                         measurement__min_timeout_s=0.01)
    study = Tuner(settings, store).run()
    assert _outcomes(study) == ["timeout", "timeout"]
    timed_out = study.trials[1]
    assert timed_out.state == TrialState.PRUNED and "stopped after" in timed_out.user_attrs[attrs.REASON]
    base = study.user_attrs[attrs.DEFAULT_BY_RUNG]["0"]["value"]
    assert timed_out.intermediate_values[1] >= base  # recorded as no better than the default


def test_the_same_config_is_measured_once_per_rung(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 4000)
    space = build_space(rocksdb, ["compression_type"])
    Tuner(_settings(rocksdb, workload, space=space, budget__trials=0), store).run()
    study = store.load("s")
    study.enqueue_trial({"compression_type": "lz4"})
    study.enqueue_trial({"compression_type": "lz4"})
    study = Tuner(_settings(rocksdb, workload, space=space, budget__trials=2), store).run()
    first, second = study.trials[1], study.trials[2]
    assert first.user_attrs.get(attrs.REUSED_FROM) is None
    assert second.user_attrs[attrs.REUSED_FROM] == first.number
    assert second.intermediate_values == first.intermediate_values


def test_the_fifo_trap_is_a_failed_data_loss_trial(rocksdb, store) -> None:
    """FIFO compaction (limit 0) allowed with --allow-unsafe: the trial fails for data loss, never wins."""
    workload = dataclasses.replace(tiny("put-get-delete", 6000), ladder=(1.0,))  # one rung: never pruned
    space = build_space(rocksdb, ["compaction_style", "fifo_compaction_max_table_files_size_mb", "write_buffer_size"],
                        allow_unsafe=True)
    Tuner(_settings(rocksdb, workload, space=space, budget__trials=0), store).run()
    study = store.load("s")
    study.enqueue_trial({"compaction_style": "fifo", "fifo_compaction_max_table_files_size_mb": 0,
                         "write_buffer_size": 1024 * 1024})
    study = Tuner(_settings(rocksdb, workload, space=space, budget__trials=1), store).run()
    trap = study.trials[1]
    assert trap.state == TrialState.PRUNED and trap.user_attrs[attrs.OUTCOME] == "data-loss"  # never the best
    assert trap.user_attrs[attrs.REASON].startswith("data loss: ")
    assert trap.user_attrs[attrs.UNSAFE] == {"compaction_style": "data-loss"}
    summary = summarize(study, rocksdb)
    assert summary.trials.counts["data-loss"] == 1 and summary.result_trial != trap.number


def test_time_budget_is_kept(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 8000)
    started = time.monotonic()
    study = Tuner(_settings(rocksdb, workload, budget__trials=None, budget__time_s=12), store).run()
    elapsed = time.monotonic() - started
    full_limit = 3 * study.user_attrs[attrs.DEFAULT_BY_RUNG]["2"]["elapsed_s"]
    assert elapsed < 12 + max(full_limit, 2.0) + 3  # ends within one rung of the budget (plus start-up)
    assert len(study.trials) > 1  # it searched until the time ended (how many fit depends on the machine's load)


def test_a_time_budget_is_spent_on_search_and_verification_together(rocksdb, store) -> None:
    """The reserve for verification grows with the candidates found, and no trial starts that cannot reach
    full size: the study ends near --time (less only what was kept back for verifying and not needed), with at
    most one trial cut short.

    A known start (never pruned) makes sure one candidate reaches full size: whether a random config survives
    successive halving at these tiny rungs is the machine's noise, and a slow CI machine may see none."""
    workload = tiny("put-get-delete", 8000)
    started = time.monotonic()
    start = (("a known config", {"write_buffer_size": 32 * 1024 * 1024}),)
    study = Tuner(_settings(rocksdb, workload, budget__trials=None, budget__time_s=30, proof__verify_top=2,
                            proof__repeats=2, search__reduction_factor=2, start_configs=start),
                  store).run()
    elapsed = time.monotonic() - started
    full_limit = 3 * study.user_attrs[attrs.DEFAULT_BY_RUNG]["2"]["elapsed_s"]
    assert "candidates" in study.user_attrs[attrs.VERIFICATION]  # verified inside the budget
    assert elapsed < 30 + max(full_limit, 2.0) + 3, elapsed
    cut = [t for t in study.trials if t.user_attrs.get(attrs.OUTCOME) == "budget"]
    assert len(cut) <= 1, [t.user_attrs.get(attrs.REASON) for t in cut]
    spent = study.user_attrs[attrs.TIME_SPENT]
    assert spent["budget_s"] == 30 and spent["reserved_s"] > 0 and spent["verification_s"] > 0
    ladder = sum(study.user_attrs[attrs.DEFAULT_BY_RUNG][str(r)]["elapsed_s"] + 0.5 for r in range(3))
    # time left unspent is only what was kept back for verifying and not needed: the rounds kept for a close
    # candidate (up to two thirds of --time) go unused when its first look settles it (seen: 19 s kept, 4 s used)
    unused = max(spent["reserved_s"] - spent["verification_s"], 0.0)
    assert 30 - elapsed <= unused + ladder + max(full_limit, 2.0) + 1, (elapsed, spent)
    # the search stops once a trial could no longer climb at the default's pace, plus the trial it was in
    assert spent["search_s"] >= 30 - spent["reserved_s"] - ladder - max(full_limit, 2.0) - 1, spent


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_run_the_budget_ends_counts_as_budget_not_against_its_config(rocksdb, store) -> None:
    """A trial may start while the time left holds a climb at the default's pace; a run still going when the
    budget ends is stopped there and recorded as ``budget`` (the sampler is not told it timed out)."""
    from knobtune.systems import make_target

    workload = tiny("put-get-delete", 8000)
    Tuner(_settings(rocksdb, workload, budget__trials=1), store).run()  # the default, at every rung
    study, budget, runner = _parts(_settings(rocksdb, workload, budget__trials=None, budget__time_s=60), store)
    full = runner.experiment.rungs[-1]
    assert budget.ladder_fits() and budget.cut_by_budget_s(full) is None  # its own limit holds
    budget.deadline = time.time() + 0.05
    assert not budget.ladder_fits() and not budget.fits(full)
    assert 0 < (budget.cut_by_budget_s(full) or 0) <= 0.05
    trial = study.ask()
    with make_target(rocksdb, workload, store.worker_scratch(), runner.experiment.driver) as target:
        run = runner.runs.measure(target, trial, rocksdb.defaults(), full, is_default=False)
    assert run.failure is Outcome.BUDGET, run
    assert run.reason.startswith("the time budget ended during") and not Outcome.BUDGET.config_fault


def test_a_control_that_fails_is_noted_and_the_study_goes_on(rocksdb, store) -> None:
    """A control (the default re-run) that does not end is not the config's fault nor the budget's: the default
    ran to its end before. Seen: a LevelDB settle that never saw its last compaction end stopped a 10-minute study
    with "--time is too short", after the control had waited out all the time left. A control's run is limited as
    any config's (timeout_factor x the default's time; 1% here, so it times out)."""
    from knobtune.systems import make_target

    notes: list[str] = []
    workload = tiny("put-get-delete", 4000)
    study, budget, runner = _parts(_settings(rocksdb, workload, budget__trials=None, budget__time_s=300,
                                             measurement__timeout_factor=0.01, measurement__min_timeout_s=0.01,
                                             research__warm_up=False), store,
                                   on_progress=lambda event: notes.append(event.message))
    with make_target(rocksdb, workload, store.worker_scratch(), runner.experiment.driver) as target:
        runner.run(target, runner.workers.ask_default(attrs.ROLE_DEFAULT))
        control = runner.workers.ask_default(attrs.ROLE_CONTROL)
        runner.run(target, control)  # does not raise
    assert study.trials[0].state == TrialState.COMPLETE
    assert study.trials[control.number].user_attrs[attrs.OUTCOME] == Outcome.TIMEOUT.value
    assert any(n.startswith(f"trial {control.number} (the default, a control) ended timeout") and
               n.endswith("the study goes on, measured against the default's earlier runs") for n in notes), notes


def test_verification_ends_with_a_verdict(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 6000)
    study = Tuner(_settings(rocksdb, workload, budget__trials=4, proof__verify_top=1, proof__repeats=3), store).run()
    verification = study.user_attrs[attrs.VERIFICATION]
    assert verification["verdict"]
    if "candidates" in verification:
        default = verification["candidates"][0]
        # 3 rounds, then more while the candidate's interval straddles 1, up to 4 x 3 (no time budget)
        assert default["label"] == "default" and 3 <= len(default["values"]) == verification["rounds"] <= 12
        assert f"{verification['rounds']} interleaved rounds" in verification["verdict"]
        assert "x the default" in verification["verdict"] or "no significant gain" in verification["verdict"]


def test_a_default_that_fails_stops_the_study(rocksdb, store) -> None:
    # db_bench runs and the default fails: reads checked on a store nothing filled (a benchmark db_bench lacks is
    # refused before anything runs now, as a bad input)
    bad = tiny("put-get-delete", 4000)
    bad = dataclasses.replace(bad, drivers={"db_bench": {"benchmarks": ["readrandom"], "verify": ["readrandom"]}})
    with pytest.raises(KnobtuneError, match="the default config failed"):
        Tuner(_settings(rocksdb, bad, budget__trials=1), store).run()


def test_controls_rerun_the_default_and_record_drift(rocksdb, store, monkeypatch) -> None:
    # the control a first default run slower than its warm-up calls for at once has its own test (below); on a
    # busy machine a run of 3,000 records is 1.1x slower than its warm-up often enough to shift these roles
    from knobtune.tuning.loop import workers
    monkeypatch.setattr(workers, "UNCONFIRMED", float("inf"))
    workload = dataclasses.replace(tiny("put-get-delete", 3000), ladder=(1.0,))  # one rung: nothing is pruned
    space = build_space(rocksdb, ["block_size"])
    study = Tuner(_settings(rocksdb, workload, space=space, budget__trials=5, measurement__control_every=2),
                  store).run()
    roles = [t.user_attrs.get(attrs.ROLE) for t in study.trials]
    assert roles == ["default", None, None, "control", None, None, "control", None]
    assert len(_outcomes(study)) == 5  # controls are not counted as trials
    controls = study.user_attrs[attrs.CONTROLS]
    assert [c["role"] for c in controls] == ["default", "control", "control"] and all(c["value"] for c in controls)
    summary = summarize(study, rocksdb)
    assert len(summary.default.default_runs) == 3 and summary.default.drift is not None
    for trial in study.trials:
        if trial.user_attrs.get(attrs.ROLE) == "control":
            assert trial.state == TrialState.COMPLETE and attrs.REUSED_FROM not in trial.user_attrs


def test_a_first_default_run_slower_than_its_warm_up_calls_for_a_control_at_once(rocksdb, store) -> None:
    """A counted run the warm-up does not confirm (1.3x slower) is checked by a control before any config; within
    the noise, the control waits for ``control_every`` full-size trials, and so it does after a slow warm-up."""
    from knobtune.systems import make_target

    workload = dataclasses.replace(tiny("put-get-delete", 3000), ladder=(1.0,))
    study, _budget, runner = _parts(_settings(rocksdb, workload, measurement__control_every=10), store)
    with make_target(rocksdb, workload, store.worker_scratch(), runner.experiment.driver) as target:
        runner.run(target, runner.workers.ask_default(attrs.ROLE_DEFAULT))
    first = study.trials[0]
    assert first.user_attrs[attrs.ROLE] == attrs.ROLE_DEFAULT and first.user_attrs[attrs.WARM_UP]["value"] > 0
    assert runner.workers.control_due() is None or "slower than its warm-up" in runner.workers.control_due()

    def default_with_warm_up(warm_up: float) -> None:  # the same default run, stored again with another warm-up
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE, value=first.value, params=first.params, distributions=first.distributions,
            user_attrs=first.user_attrs | {attrs.WARM_UP: {"value": warm_up, "elapsed_s": warm_up}}))

    full = first.user_attrs[attrs.rung_key(0)]["value"]
    default_with_warm_up(full / 1.3)  # elapsed_s: the warm-up took 1/1.3 of the counted run's time
    assert runner.workers.control_due() == "its first run was 1.30x slower than its warm-up: a control checks it now"
    default_with_warm_up(full / 1.05)
    assert runner.workers.control_due() is None
    default_with_warm_up(full * 1.3)  # a slow warm-up is what it is for: nothing to check
    assert runner.workers.control_due() is None


def test_trials_that_reuse_earlier_runs_do_not_call_for_controls(rocksdb, store) -> None:
    """One bool knob: after its two values have run, every trial reuses their runs and runs nothing, so no
    control is due however many of them complete. (A default whose counted run was slower than its warm-up calls
    for one control of its own, seen on a loaded machine: that one is not the count's.)"""
    workload = dataclasses.replace(tiny("put-get-delete", 3000), ladder=(1.0,))
    space = build_space(rocksdb, ["optimize_filters_for_hits"])
    events = []
    study = Tuner(_settings(rocksdb, workload, space=space, budget__trials=8, measurement__control_every=2),
                  store, on_progress=events.append).run()
    sampled = [t for t in study.trials if not attrs.is_default(t.user_attrs)]
    reused = [t for t in sampled if attrs.REUSED_FROM in t.user_attrs]
    assert len(sampled) == 8 and len(reused) >= 6
    ran_here = len(sampled) - len(reused)
    controls = [t for t in study.trials if t.user_attrs.get(attrs.ROLE) == attrs.ROLE_CONTROL]
    called = [e.message for e in events if e.message.startswith("re-running the default as a control")]
    assert len(controls) == len(called)
    assert len([m for m in called if "drift check" in m]) == ran_here // 2
    assert len(called) - ran_here // 2 <= 1  # at most the one for a slow first run


def test_a_budget_too_short_for_the_default_says_so(rocksdb, store) -> None:
    from knobtune.errors import UsageError

    with pytest.raises(UsageError, match="--time is too short"):
        Tuner(_settings(rocksdb, tiny("put-get-delete", 20000), budget__trials=None, budget__time_s=0.3), store).run()


def test_verification_is_not_repeated_for_the_same_candidates(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 3000)
    settings = _settings(rocksdb, workload, budget__trials=3, proof__verify_top=1, proof__repeats=2)
    first = Tuner(settings, store).run().user_attrs[attrs.VERIFICATION]
    notes = []
    again = Tuner(settings, store, on_progress=notes.append).run().user_attrs[attrs.VERIFICATION]
    assert again == first
    if "candidates" in first:
        assert any("verified before" in n.message for n in notes)


def test_an_unverifiable_workload_rechecks_its_winner_with_the_twin(rocksdb, store) -> None:
    """fillrandom cannot check its reads; a FIFO winner is caught by the twin (each key once, all read back)."""
    workload = dataclasses.replace(tiny("fillrandom", 30000), ladder=(1.0,))  # one rung: never pruned
    space = build_space(rocksdb, ["compaction_style", "write_buffer_size"], allow_unsafe=True)
    Tuner(_settings(rocksdb, workload, space=space, budget__trials=0), store).run()
    study = store.load("s")
    study.enqueue_trial({"compaction_style": "fifo", "write_buffer_size": 1024 * 1024})
    study = Tuner(_settings(rocksdb, workload, space=space, budget__trials=1, proof__verify_top=1, proof__repeats=2),
                  store).run()
    assert study.trials[1].state == TrialState.COMPLETE  # fillrandom alone cannot see the loss
    verification = study.user_attrs[attrs.VERIFICATION]
    assert verification["rejected"]["trial 1"].startswith("data loss: ")
    assert "failed the verifiable twin" in verification["verdict"] and "keep the default" in verification["verdict"]
    assert summarize(study, rocksdb).result_trial is None  # nothing is recommended over the default


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_two_workers_asking_for_the_last_trial_at_once_the_higher_number_gives_way(rocksdb, store) -> None:
    """The --trials check and the ask are two steps: both workers may pass the check for the last trial. Decided by
    trial number after asking, one runs and the other is given up before it runs, uncounted."""
    study, budget, runner = _parts(_settings(rocksdb, tiny("put-get-delete", 4000), budget__trials=2), store)
    done = study.ask()
    done.set_user_attr(attrs.CONFIG, {"block_size": 8192})
    done.set_user_attr(attrs.CONFIG_HASH, "x")
    done.set_user_attr(attrs.OUTCOME, Outcome.COMPLETE.value)
    study.tell(done, 1.0)
    first, second = study.ask(), study.ask()  # both passed the check (1 of 2 counted) before either asked
    assert not budget.over_trial_budget(first)
    assert budget.over_trial_budget(second)
    runner.finish(second, Outcome.BUDGET, "other workers' trials reached --trials first")
    assert [r.number for r in budget.counted_trials()] == [done.number, first.number]
    assert not budget.over_trial_budget(first)  # the one given up never counts against the other


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_trial_lost_after_it_stored_its_outcome_counts_once_through_its_retry(rocksdb, store) -> None:
    """Another worker may end a trial as lost after the trial stored its outcome but before it told Optuna (its link
    cut in between): the trial is failed though it says complete, and its config is queued again. --trials and the
    outcome counts take the retry, not both."""
    from knobtune.report.summary import count_outcomes
    from knobtune.tuning.loop.workers import fail_unowned

    study, budget, runner = _parts(_settings(rocksdb, tiny("put-get-delete", 4000), budget__trials=2), store)
    lost = study.ask()
    lost.set_user_attr(attrs.CONFIG, {"block_size": 8192})
    lost.set_user_attr(attrs.CONFIG_HASH, "x")
    lost.set_user_attr(attrs.OUTCOME, Outcome.COMPLETE.value)  # stored; its tell never reached the storage
    assert fail_unowned(study, budget.workers.storage, grace_s=0) == [lost.number]
    frozen = study.get_trials(deepcopy=False)[lost.number]
    runner.queue.requeue(frozen.params, frozen.user_attrs, lost.number)
    assert budget.counted_trials() == []
    retry = study.ask()
    assert retry.user_attrs[attrs.RETRY_OF] == lost.number
    retry.set_user_attr(attrs.CONFIG_HASH, "x")
    runner.finish(retry, Outcome.COMPLETE, "", value=1.0)
    assert [r.number for r in budget.counted_trials()] == [retry.number]
    counts = count_outcomes(study.get_trials(deepcopy=False))
    assert (counts["complete"], counts.get("fail")) == (1, 1)


def test_a_new_study_tries_the_guide_first_and_verifies_beside_it_then_another_starts_from_it(rocksdb, store) -> None:
    from knobtune.tuning.records import starting_configs

    workload = dataclasses.replace(tiny("put-get-delete", 4000), ladder=(1.0,))  # one rung: nothing is pruned
    first = Tuner(_settings(rocksdb, workload, study="first", budget__trials=3, research__try_known_configs=True,
                            research__rules=True, proof__verify_top=1, proof__repeats=2), store).run()
    sampled = [t for t in first.trials if not attrs.is_default(t.user_attrs)]
    assert attrs.is_default(first.trials[0].user_attrs)  # trial 0 stays the default; the guide comes next
    assert sampled[0].number == 1 and sampled[0].user_attrs[attrs.STARTED_FROM] == "rocksdb-guide"
    assert [t.user_attrs[attrs.STARTED_FROM] for t in sampled[1:]] == [  # it reads single keys: a hash memtable
        "rocksdb-point-lookups", "rocksdb-point-lookups-universal"]  # (a rule's starts; --trials 3 leaves no room
    # for the composed start of the other rules, which is not queued)
    guide = {"level_compaction_dynamic_level_bytes": True, "max_background_jobs": 6, "bytes_per_sync": 1 << 20,
             "block_size": 16 << 10, "cache_index_and_filter_blocks": True}  # pin_l0_... is not searched
    assert guide.items() <= sampled[0].user_attrs[attrs.CONFIG].items()
    verification = first.user_attrs[attrs.VERIFICATION]
    if "candidates" in verification:  # a candidate completed: the guide ran beside it as a reference
        references = [c for c in verification["candidates"] if c.get("reference")]
        assert [c["label"] for c in references] == ["rocksdb-guide"]

    starts = starting_configs(first, "rocksdb")
    assert starts and all(label.startswith("study first trial ") for label, _ in starts)
    second = Tuner(_settings(rocksdb, workload, study="second", budget__trials=len(starts), start_configs=starts),
                   store).run()
    tried = [t for t in second.trials if not attrs.is_default(t.user_attrs)]
    assert [t.user_attrs[attrs.STARTED_FROM] for t in tried] == [label for label, _ in starts]
    assert [t.user_attrs[attrs.CONFIG] for t in tried] == [config for _, config in starts]
    with pytest.raises(UsageError, match="tuned rocksdb, not leveldb"):
        starting_configs(first, "leveldb")


def test_a_time_budget_gives_up_the_baselines_then_candidates_rather_than_end_late() -> None:
    from knobtune.tuning.loop.reserve import fitting_verification

    def estimate_s(top: int, references: bool) -> float:  # the default, 20 s; a baseline 30 s; 30 s per candidate
        return 20.0 + 30.0 * references + 30.0 * top

    assert fitting_verification(estimate_s, 3, 150.0) == (3, True)  # 140 s fits
    assert fitting_verification(estimate_s, 3, 110.0) == (3, False)  # the baseline goes before a candidate
    assert fitting_verification(estimate_s, 3, 90.0) == (2, False)
    assert fitting_verification(estimate_s, 3, 30.0) == (1, False)  # even one does not fit: one is verified
    assert fitting_verification(estimate_s, 1, 1000.0) == (1, True)


def test_a_tight_budget_verifies_without_the_baselines_and_says_how_late_it_ends(rocksdb, store) -> None:
    notes: list[str] = []
    _, budget, _ = _parts(_settings(rocksdb, tiny("put-get-delete", 4000), budget__trials=None, budget__time_s=300,
                                    proof__verify_top=2, proof__repeats=5), store,
                          on_progress=lambda event: notes.append(event.message), known=("rocksdb-guide",))
    budget.reserve.verify_top, budget.reserve.verify_known = 1, False  # as keep_back fits them
    budget.reserve.wanted_s, budget.reserve.fitted_s = 285.0, 200.0
    budget.reserve.first_look_s = 200.0  # the first look (--repeats rounds) may end late: added rounds never do
    fitted = budget.reserve.fitted_verification()
    assert (fitted.proof.verify_top, fitted.proof.known_configs) == (1, False)
    assert notes[0].startswith("verifying the top 1 of --verify-top 2 without rocksdb-guide beside the default: "
                               "all would take ~285 s, more than half of the 300 s budget")
    assert "tune ends ~50 s past --time" in notes[1]

    workload = dataclasses.replace(tiny("put-get-delete", 4000), ladder=(1.0,))  # one rung: nothing is pruned
    study = Tuner(_settings(rocksdb, workload, study="tight", budget__trials=2, research__try_known_configs=True,
                            proof__verify_top=1, proof__repeats=2, proof__known_configs=False), store).run()
    verification = study.user_attrs[attrs.VERIFICATION]
    assert "candidates" in verification, verification  # the guide, at least, completed
    assert not [c for c in verification["candidates"] if c.get("reference")]
    assert "beside it" not in verification["verdict"]


def test_the_per_run_overhead_is_what_a_trial_took_beyond_its_runs_records() -> None:
    from datetime import datetime, timedelta

    from knobtune.tuning.loop.costs import MIN_RUN_OVERHEAD_S, run_overhead_s

    start = datetime(2026, 11, 23, 12, 0, 0)
    # a settled run's recovery is inside its elapsed time, so it is not counted twice
    runs = {attrs.rung_key(0): {"elapsed_s": 1.5, "recovery_s": 0.5}, attrs.rung_key(1): {"elapsed_s": 3.5}}
    trial = optuna.trial.create_trial(value=3.5, user_attrs=runs)
    trial.datetime_start, trial.datetime_complete = start, start + timedelta(seconds=8.0)
    assert run_overhead_s(trial) == pytest.approx((8.0 - 5.0) / 2)  # a server restarting for every run
    warmed = optuna.trial.create_trial(value=3.5, user_attrs={**runs, attrs.WARM_UP: {"value": 3.0, "elapsed_s": 3.5}})
    warmed.datetime_start, warmed.datetime_complete = start, start + timedelta(seconds=11.5)
    assert run_overhead_s(warmed) == pytest.approx((11.5 - 8.5) / 3)  # the default's warm-up is a run, not overhead
    trial.datetime_complete = start + timedelta(seconds=5.1)
    assert run_overhead_s(trial) == MIN_RUN_OVERHEAD_S  # never below the floor
    trial.datetime_complete = None
    assert run_overhead_s(trial) is None


@pytest.mark.parametrize("scale", [True, False])
def test_small_rungs_run_the_config_scaled_to_their_share_of_the_data(rocksdb, store, scale: bool) -> None:
    import json

    workload = tiny("put-get-delete", 4000)
    study = Tuner(_settings(rocksdb, workload, budget__trials=0, research__scale_rungs=scale), store).run()
    cache = {rung.index: json.loads((store.artifacts("s") / "trial-0000" / f"rung-{rung.index}.settle.spec.json")
                                    .read_text())["config"]["block_cache_size"] for rung in workload.rungs}
    full = rocksdb.knobs["cache_size"].default
    assert cache == {r.index: str(round(full * r.fraction) if scale else full) for r in workload.rungs}
    assert study.user_attrs[attrs.RUNGS_RUN_SCALED] is scale
    with pytest.raises(UsageError, match="research.scale_rungs"):  # resumed with the other choice: would not compare
        Tuner(_settings(rocksdb, workload, budget__trials=0, research__scale_rungs=not scale), store).run()


def test_a_known_starting_config_climbs_to_full_size_even_when_a_small_rung_would_prune_it(rocksdb, store) -> None:
    """A known config slower than the default at the first rung, where halving alone would prune it, still climbs
    to full size. At 300 records a run is mostly the process's start, so on a busy machine the default's run can
    be the slower one: the study runs again (a new one each time) until the config was slower there, and every
    time it climbed."""
    workload = tiny("put-get-delete", 6000)
    slow = {"compression_type": "zlib", "block_size": 1024}  # slower than the default at every size, not 3x
    slower_at_rung_0 = False
    for attempt in range(3):
        study = Tuner(_settings(rocksdb, workload, study=f"s{attempt}", budget__trials=1,
                                start_configs=(("a slow known config", slow),)), store).run()
        default, started = study.trials[0], study.trials[1]
        assert started.user_attrs[attrs.STARTED_FROM] == "a slow known config"
        assert started.user_attrs[attrs.OUTCOME] == Outcome.COMPLETE and started.user_attrs[attrs.REACHED_RUNG] == 2
        slower_at_rung_0 = started.user_attrs["rung_0"]["value"] > default.user_attrs["rung_0"]["value"]
        if slower_at_rung_0:
            break  # halving alone would have pruned it, and it climbed
    assert slower_at_rung_0, "in none of 3 studies was the slow config slower than the default at the first rung"


def test_a_time_budget_that_cannot_hold_one_trial_and_its_verification_is_refused(rocksdb, store) -> None:
    """Once the default's ladder has shown the system's pace, a --time that leaves no room for a sampled trial and
    its verification is refused with the budget that would, instead of ending unused; the default's runs stay."""
    # The default's ladder runs first with no --time (a slow machine's pace must not decide the test); resumed with
    # a --time of its ladder's length, half of which is kept back for verifying (2 x 40 runs at full size would take
    # far more): no ladder fits in the rest.
    workload = tiny("put-get-delete", 12000)
    Tuner(_settings(rocksdb, workload, budget__trials=0), store).run()
    ladder_s = sum(run.elapsed_s for run in record_of(store.load("s").trials[0]).runs.values())
    with pytest.raises(UsageError, match=r"cannot hold a sampled trial and its verification") as caught:
        Tuner(_settings(rocksdb, workload, budget__trials=None, budget__time_s=max(2.0, ladder_s),
                        proof__verify_top=1, proof__repeats=40),
              store).run()
    assert "Fix: --time " in str(caught.value) and "resumes the study" in str(caught.value)
    study = store.load("s")
    assert [t.number for t in study.trials] == [0] and attrs.is_default(study.trials[0].user_attrs)
    assert study.trials[0].state == TrialState.COMPLETE  # the default's ladder is kept for the resume


def test_with_no_config_at_full_size_the_time_kept_for_verifying_goes_to_the_search(rocksdb, store) -> None:
    """When the search's window closes and no sampled config has reached full size, the reserve would go unused:
    it goes to the search (said once); a config reaching full size then is named as a lead, never the result."""
    from knobtune.tuning.proof import name_lead, study_result

    workload = tiny("put-get-delete", 6000)
    Tuner(_settings(rocksdb, workload, budget__trials=0), store).run()  # the default's ladder: the system's pace
    notes: list[str] = []
    experiment = _settings(rocksdb, workload, budget__trials=None, budget__time_s=600, proof__verify_top=1,
                           proof__repeats=10)
    study, budget, _ = _parts(experiment, store, on_progress=lambda event: notes.append(event.message))
    budget.reserve.keep_back()
    ladder_s = sum(budget.costs.default_s(rung) for rung in experiment.rungs)
    assert budget.reserve.kept_s > 2  # seconds of tiny runs: the margin below is half of it
    budget._checked_pace = True  # the budget held a trial when the search began
    budget.deadline = time.time() + ladder_s + budget.reserve.kept_s / 2  # the window has closed, the deadline not
    assert not budget.ladder_fits()
    assert budget.may_start_trial() and budget.reserve_searched and budget.ladder_fits()
    assert len([n for n in notes if "kept back for verifying go to the search" in n]) == 1
    name_lead(study, experiment, notes.append)
    assert study.user_attrs[attrs.VERIFICATION]["verdict"].startswith("no candidate to verify")

    start = (("a start", {"max_write_buffer_number": 4}),)  # a start climbs to full size whatever it runs
    lead = Tuner(_settings(rocksdb, workload, study="lead", budget__trials=1, start_configs=start), store).run()
    name_lead(lead, experiment, notes.append)
    assert notes[-1].startswith("trial 1 reached full size at ") and "x the default in a single run" in notes[-1]
    assert "not verified" in notes[-1] and "longer --time" in notes[-1]
    assert study_result(lead).trial is None and not study_result(lead).verified
    _, with_candidate, _ = _parts(experiment.changed(study="lead"), store)
    with_candidate.reserve.keep_back()
    assert with_candidate.reserve.kept_s > 0 and not with_candidate._search_the_reserve()


def test_a_production_ratio_holds_configs_to_its_memory_for_the_benchmarks_data(rocksdb, store) -> None:
    """--production-data 100GiB --production-memory 1GiB on a benchmark of ~80 MiB: configs may plan no more caches
    and buffers than the default's own plan; one planning a 512 MiB cache is infeasible (memory), never run, and
    the study records the ratio it assumed."""
    workload = tiny("put-get-delete", 8000)
    big = (("a big cache", {"cache_size": 512 << 20}),)
    study = Tuner(_settings(rocksdb, workload, budget__trials=1, limits__production_data_bytes=100 << 30,
                            limits__production_memory_bytes=1 << 30, start_configs=big),
                  store).run()
    default_plan = rocksdb.memory.planned_bytes(rocksdb.defaults())
    assert study.user_attrs[attrs.EXPERIMENT]["limits"]["production_data_bytes"] == 100 << 30
    assert study.user_attrs[attrs.PLANNED_LIMIT] == default_plan
    started = study.trials[1]
    assert started.user_attrs[attrs.OUTCOME] == Outcome.MEMORY
    assert "over the memory limit" in started.user_attrs[attrs.REASON]
    summary = summarize(study, rocksdb)
    assert summary.cost.limits.production is not None and summary.cost.limits.production.memory_bytes == 1 << 30
    from knobtune.report.summary_text import cost_lines  # noqa: PLC0415

    assert any("memory-to-data ratio assumed" in line for line in cost_lines(summary.cost, summary.default))
