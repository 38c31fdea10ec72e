"""A run is ``target.run(config, rung)``: the system is given the config once per run, scaled to the rung by the
target itself when the study scales rungs, and nothing of a run's config waits in the target for the next.

Counted from what the systems saw: RocksDB's own LOG and OPTIONS file in each run's store (``readback``), and
PostgreSQL's own log and ``pg_settings`` while each run went."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knobtune.knobs import Value, load_catalog
from knobtune.systems import make_target
from knobtune.targets import Target
from knobtune.tuning import Experiment, Tuner, build_space
from knobtune.tuning.loop import study as study_module

from conftest import tiny
from readback import READBACK, same, watch

SCALED = ["write_buffer_size", "max_bytes_for_level_base", "target_file_size_base"]  # data-sized: scaled at a rung


def _opens_and_held(target: Target, names: list[str]) -> list[tuple[int, dict[str, object]]]:
    """For each run of ``target`` (as its driver left the store, before the settle reopens it): how many times
    RocksDB opened that run's store (its LOG's "DB SUMMARY", one per open) and what it held of ``names``."""
    ran_workload, seen = target.run_workload, []  # type: ignore[attr-defined]

    def then_count(config, rung, db_dir: Path, **kwargs):  # noqa: ANN001, ANN202
        measured = ran_workload(config, rung, db_dir, **kwargs)
        opens = sum(log.read_text(errors="replace").count("DB SUMMARY") for log in db_dir.glob("LOG*"))
        seen.append((opens, READBACK["rocksdb"].read(target, names, {"db_dir": db_dir})))
        return measured

    target.run_workload = then_count  # type: ignore[attr-defined]
    return seen


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "unscaled"])
def test_a_trial_gives_rocksdb_its_config_once_per_run_scaled_to_the_rung(rocksdb, store, monkeypatch,
                                                                           scale: bool) -> None:
    """The default's trial of a study: a warm-up at full size, then its three rungs. Each run's store was opened
    once, under the config scaled to that rung's share of the data when the study scales rungs (the target scales
    it: the study hands it the config as it is), else under the config as it is."""
    workload = tiny("put-get-delete", 4000)
    runs: list[list[tuple[int, dict[str, object]]]] = []
    made = study_module.make_target

    def watched(*args, **options):  # noqa: ANN002, ANN003, ANN202
        target = made(*args, **options)
        runs.append(_opens_and_held(target, SCALED))
        return target

    monkeypatch.setattr(study_module, "make_target", watched)
    experiment = Experiment.of(rocksdb, workload, study="s", space=build_space(rocksdb), budget__trials=0,
                               proof__verify_top=0, proof__repeats=0, research__rules=False,
                               research__try_known_configs=False, research__scale_rungs=scale)
    Tuner(experiment, store).run()
    (seen,) = runs
    logs = sorted(p.name for p in (store.artifacts("s") / "trial-0000").glob("*.log") if p.name.count(".") == 1)
    assert logs == ["rung-0.log", "rung-1.log", "rung-2.log", "warm-up.log"], "a warm-up and three rungs ran"
    fractions = [1.0, *(rung.fraction for rung in workload.rungs)]  # the warm-up, then the ladder
    assert [opens for opens, _ in seen] == [1] * len(fractions), "each run's store was opened once, by its run"
    defaults = rocksdb.defaults()
    for fraction, (_, held) in zip(fractions, seen, strict=True):
        expected = rocksdb.at_fraction(defaults, fraction) if scale else defaults
        wrong = {name: held.get(name) for name in SCALED if not same(rocksdb.knobs[name], held.get(name),
                                                                     expected[name])}
        assert not wrong, f"at fraction {fraction} RocksDB held {wrong}, not {[expected[n] for n in wrong]}"
    small = rocksdb.at_fraction(defaults, workload.rungs[0].fraction)
    assert all(small[name] < defaults[name] for name in SCALED), "the first rung's scaled values differ from the full"


def _starts(log: Path) -> int:
    """The times PostgreSQL started (or recovered) and answered, by its own log."""
    return len(re.findall(r"database system is ready to accept connections", log.read_text(errors="replace")))


@pytest.mark.slow
def test_a_server_runs_each_rung_under_its_config_started_once_and_keeps_nothing_between_runs(tmp_path: Path) -> None:
    """PostgreSQL over a three-rung ladder, the way a trial climbs it, then another config: each run restores the
    data and starts the server under the run's config (once, then once more for the settle's crash recovery, by
    the server's own log); the server held that config while the run went (``pg_settings``); between runs no
    server is left running (today's life: every run restores the data, so none outlives its run) and the target
    keeps no config: the next run's config is the only one the server sees."""
    postgresql = load_catalog("postgresql")
    workload = tiny("pgbench-tpcb", 600)
    names = ["work_mem", "random_page_cost"]
    first: dict[str, Value] = postgresql.config({"work_mem": "8MiB", "random_page_cost": 1.5})
    other: dict[str, Value] = postgresql.config({"work_mem": "16MiB", "random_page_cost": 2.5})
    plan = [(first, rung) for rung in workload.rungs] + [(other, workload.rungs[0])]
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        readings = watch(target, names)
        for index, (config, rung) in enumerate(plan):
            target.run(config, rung, timeout_s=120, log_path=tmp_path / f"run-{index}.log", seed=1)
            assert target._server is None, "no server runs between runs"  # type: ignore[attr-defined]
    assert [_starts(tmp_path / f"run-{index}.server.log") for index in range(len(plan))] == [2] * len(plan)
    assert len(readings) == len(plan), "the server was read once in each run"
    for (config, _), held in zip(plan, readings, strict=True):
        assert all(same(postgresql.knobs[n], held[n], config[n]) for n in names), (held, {n: config[n] for n in names})
