"""The analytic workload at scale factor 0.01: the kit loads, every query runs and is checked against the default."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from knobtune.knobs import load_catalog
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.systems.postgresql import tpch
from knobtune.systems.postgresql.server import PG_BIN, connection
from knobtune.workloads import load_workload

from conftest import CORPUS

pytestmark = pytest.mark.skipif(not (PG_BIN / "postgres").exists(), reason="PostgreSQL 15 is not installed")

TINY = CORPUS / "workloads" / "tpch-tiny.toml"
PARALLEL = {"max_parallel_workers_per_gather": 4, "parallel_setup_cost": 10.0, "parallel_tuple_cost": 0.001,
            "min_parallel_table_scan_size": "64KiB"}


@pytest.fixture(scope="module")
def postgresql():
    return load_catalog("postgresql")


def test_parameters_are_the_seeds_and_in_the_specifications_ranges() -> None:
    first, again, other = tpch.parameters(7, 0.5), tpch.parameters(7, 0.5), tpch.parameters(8, 0.5)
    assert first == again and first != other and sorted(first) == list(tpch.QUERIES)
    assert 60 <= int(first[1]["delta"]) <= 120 and first[7]["nation1"] != first[7]["nation2"]
    assert len({first[16][f"size{i}"] for i in range(1, 9)}) == 8 and first[11]["fraction"] == "0.0002000000"
    assert sorted(tpch.order(7)) == list(tpch.QUERIES) and tpch.order(7) != tpch.order(8)


def test_answers_compare_numbers_within_a_relative_tolerance() -> None:
    default = (("A", "F", "1234567.8901", "25.3999335106382979"),)
    assert tpch.difference((("A", "F", "1234567.8901", "25.3999335106382970"),), default) is None
    assert tpch.difference((("A", "F", "1234567.8911", "25.3999335106382979"),), default) == \
        "row 1, column 3: '1234567.8911', the default's '1234567.8901'"
    assert tpch.difference((("R", "F", "1234567.8901", "25.3999335106382979"),), default).startswith("row 1, column 1")
    assert tpch.difference((), default) == "0 rows, the default's 1"


@pytest.mark.slow
def test_the_kit_loads_and_every_query_runs_and_is_checked(postgresql, tmp_path: Path) -> None:
    workload = load_workload(TINY)
    target = make_target(postgresql, workload, tmp_path / "scratch", "queries")
    assert [len(target.queries(rung, 1)) for rung in workload.rungs] == [6, 11, 22]
    with target:
        default = target.run(postgresql.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "default.log",
                             seed=1)
        tuned_config = postgresql.config({"work_mem": "64MiB", "jit": False})
        tuned = target.run(tuned_config, workload.rungs[0], timeout_s=120, log_path=tmp_path / "tuned.log", seed=1)
        fresh = target.run(tuned_config, workload.rungs[0], timeout_s=120, log_path=tmp_path / "fresh.log", seed=2)
    assert sorted(p.name for p in default.phases) == [f"q{q:02d}" for q in tpch.QUERIES]
    assert all(p.ops == 1 and p.seconds > 0 for p in default.phases) and default.verified
    assert default.settle.recovery_s > 0 and default.elapsed_s > default.workload_s >= sum(
        p.seconds for p in default.phases)
    assert [p.name for p in tuned.phases] == [f"q{q:02d}" for q in tpch.order(1)[:6]]
    assert (tmp_path / "fresh-default.log").exists(), "a new seed's answers are first computed under the default"
    assert not (tmp_path / "tuned-default.log").exists(), "the default's run answered seed 1's queries already"
    assert fresh.verified


@pytest.mark.slow
def test_a_changed_answer_fails_the_run_as_data_loss(postgresql, tmp_path: Path) -> None:
    workload = load_workload(TINY)
    with make_target(postgresql, workload, tmp_path / "scratch", "queries") as target:
        target.run(postgresql.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "default.log", seed=1)
        pristine = target._home / "pristine"  # one line's quantity changed in the data every run starts from
        target._start(pristine, {}, tmp_path / "corrupt.server.log")
        try:
            target._query("UPDATE lineitem SET l_quantity = l_quantity + 1 WHERE (l_orderkey, l_linenumber) = "
                          "(SELECT l_orderkey, l_linenumber FROM lineitem WHERE l_shipdate < date '1995-01-01' "
                          "ORDER BY 1, 2 LIMIT 1) RETURNING l_orderkey", tmp_path / "corrupt.log")
        finally:
            target._stop_server(clean=True)
        with pytest.raises(RunFailure) as caught:
            target.run(postgresql.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "changed.log", seed=1)
    assert caught.value.kind is FailureKind.DATA_LOSS
    assert "answer differs from the default's: row " in caught.value.reason
    assert caught.value.reason.startswith("query ")


@pytest.mark.slow
def test_a_correct_parallel_plan_passes_the_check(postgresql, tmp_path: Path) -> None:
    workload = load_workload(TINY)
    config = postgresql.config(PARALLEL)
    with make_target(postgresql, workload, tmp_path / "scratch", "queries") as target:
        measurement = target.run(config, workload.full, timeout_s=120, log_path=tmp_path / "parallel.log", seed=3)
        assert (tmp_path / "parallel-default.log").exists()
        data = target._restore()
        target._start(data, config, tmp_path / "explain.server.log")
        try:
            plan = subprocess.run([str(PG_BIN / "psql"), "-X", *connection(target._home), "-c",
                                   "EXPLAIN (COSTS OFF) SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY 1"],
                                  capture_output=True, text=True, check=True).stdout
        finally:
            target._stop_server(clean=False)
    assert "Gather" in plan and "Parallel Seq Scan on lineitem" in plan
    assert measurement.verified and len(measurement.phases) == 22


@pytest.mark.slow
def test_a_short_study_of_the_kit_runs_from_the_command_line(tmp_path: Path) -> None:
    """`tune` over the queries driver end to end (it once failed before its first run: the diagnosis asked the
    target how many clients it runs, and the queries driver had no answer). A count of trials, not a time: beside
    other work `--time 1m` was refused as too short for a trial and its verification at the loaded pace."""
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", "tune", "postgresql", "--workload", str(TINY),
                             "--driver", "queries", "--trials", "2", "--repeats", "2", "--dir", str(tmp_path),
                             "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["counts"]["complete"] >= 1 and summary["verdict"], summary
