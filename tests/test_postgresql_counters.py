"""PostgreSQL's counters over a run: the wait events sampled while it goes, and every counter described as data.

The runs are real (tiny pgbench TPC-B); the sampler is always stopped, also when the run times out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from knobtune.errors import CatalogError
from knobtune.knobs import load_catalog
from knobtune.targets import UNITS, FailureKind, RunFailure, described_counters
from knobtune.systems import make_target
from knobtune.tuning.search import counter_meanings
from knobtune.server.process import process_tree
from knobtune.systems.postgresql import counters, replay, waits
from knobtune.systems.postgresql.target import PG_BIN

from conftest import tiny

needs_postgresql = pytest.mark.skipif(not (PG_BIN / "postgres").exists(), reason="PostgreSQL 15 is not installed")


@pytest.fixture(scope="module")
def postgresql():
    return load_catalog("postgresql")


def _our_psql() -> list[int]:
    """psql processes descended from this test process (a sampler left running would be one)."""
    found = []
    for pid in process_tree(os.getpid())[1:]:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "psql":
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.slow
@needs_postgresql
def test_a_run_records_its_wait_events_and_every_counter_is_described(postgresql, tmp_path: Path) -> None:
    # ~4 s of pgbench: at 3,000 transactions (~1 s, 4 samples) every sample found the clients between statements
    # about 1 run in 5 here
    workload = tiny("pgbench-tpcb", 12_000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        measurement = target.run(postgresql.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "run.log",
                                 seed=1)
        assert _our_psql() == [], "the sampler stops with the benchmark, before the settle"
    got = measurement.counters
    assert got["wait_samples"] > 0 and got["active_backends_mean"] > 0
    types = [got[name] for name in (*waits.TYPES.values(), waits.OTHER)]
    assert all(0 <= share <= 1 for share in types) and sum(types) == pytest.approx(1.0)
    assert all(0 <= got[name] <= 1 for name in waits.EVENTS)
    assert got["wait_share_wal_write"] <= got["wait_share_io"] + got["wait_share_lwlock"] + 1e-9
    polls = len(waits.samples((tmp_path / "run.samples.log").read_text()))
    assert polls >= 2 and got["wait_samples"] == pytest.approx(got["active_backends_mean"] * polls)
    assert set(got) <= set(counter_meanings("postgresql")), "every counter a run gives is described in counters.toml"
    assert measurement.summary()["counters"] == dict(got)


@needs_postgresql
def test_the_sampler_is_stopped_when_the_run_times_out(postgresql, tmp_path: Path) -> None:
    workload = tiny("pgbench-tpcb", 200_000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        with pytest.raises(RunFailure) as caught:
            target.run(postgresql.defaults(), workload.full, timeout_s=1.5, log_path=tmp_path / "run.log", seed=1)
        assert _our_psql() == []
    assert caught.value.kind is FailureKind.TIMEOUT
    assert waits.samples((tmp_path / "run.samples.log").read_text()), "it sampled while pgbench ran"


def test_samples_count_by_type_and_event() -> None:
    """psql's lines as the sampler reads them: one per sample, psql's own messages skipped."""
    text = ("sample|\nsample|CPU:CPU,IO:WALSync,LWLock:WALWrite,Lock:transactionid\n"
            "psql:waits.sql:2: some message\nsample|IO:DataFileRead,Timeout:PgSleep,LWLock:WALWrite,CPU:CPU\n")
    got = waits.counters(waits.samples(text))
    assert got["wait_samples"] == 8 and got["active_backends_mean"] == pytest.approx(8 / 3)
    assert got["wait_share_cpu"] == got["wait_share_lwlock"] == 0.25 and got["wait_share_other"] == 0.125
    assert got["wait_share_wal_write"] == 0.375 and got["wait_share_row_lock"] == 0.125
    assert waits.counters(waits.samples("sample|\n")) == {"wait_samples": 0.0, "active_backends_mean": 0.0}


def test_the_described_counters_are_exactly_those_postgresql_gives() -> None:
    gives = {*counters.COUNTERS, "cache_hit_ratio", *waits.NAMES, *replay.COUNTERS}
    assert set(counter_meanings("postgresql")) == gives
    assert all(entry.unit in UNITS for entry in counter_meanings("postgresql").values())


@pytest.mark.parametrize(("entry", "says"), [
    ('[counters.x]\nmeaning = "m"\nunit = "ms"\nread = "r"\n', "unit 'ms' is not a counter's unit"),
    ('[counters.x]\nmeaning = "m"\nunit = "s"\n', "no 'counters.x.read'"),
    ('[counters]\nx = 1\n', "is not a table"),
])
def test_a_bad_description_names_the_counter_and_the_fix(tmp_path: Path, entry: str, says: str) -> None:
    path = tmp_path / "counters.toml"
    path.write_text(entry)
    with pytest.raises(CatalogError, match=says) as caught:
        described_counters(path)
    assert "counters.x" in str(caught.value) and "Fix:" in str(caught.value) and "\n" not in str(caught.value)
