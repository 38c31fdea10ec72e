"""PostgreSQL under the same sysbench workloads as a system file's server: one real run at a small size."""

from __future__ import annotations

import dataclasses

import pytest

from knobtune.knobs import load_catalog
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.workloads import load_workload

pytestmark = pytest.mark.slow


def _small(name: str):
    workload = load_workload(name).scaled(600)
    return dataclasses.replace(workload, drivers={"sysbench": {**workload.drivers["sysbench"], "table_size": 2000,
                                                               "clients": 4}})


def test_oltp_read_write_runs_on_postgresql_and_its_rows_and_id_sums_hold(tmp_path) -> None:
    """The shared workload file, sysbench's pgsql driver on the server's socket: the run's transactions are counted,
    the settle's crash and recovery keep every table's rows and id sum, the server's counters are read."""
    catalog = load_catalog("postgresql")
    workload = _small("oltp_read_write")
    with make_target(catalog, workload, tmp_path / "scratch", "sysbench") as target:
        run = target.run(catalog.defaults(), workload.rungs[-1], timeout_s=120, log_path=tmp_path / "run.log", seed=2)
        assert run.verified and run.phases[0].ops == workload.rungs[-1].records
        assert run.phases[0].p99_us and run.settle is not None and run.counters["checkpoints_requested"] >= 0
        # expects other sums: a check that bites
        target.command.section = {**target.command.section, "table_size": 1999}
        with pytest.raises(RunFailure) as caught:
            target.run(catalog.defaults(), workload.rungs[0], timeout_s=120, log_path=tmp_path / "run2.log", seed=2)
        assert caught.value.kind is FailureKind.DATA_LOSS and "expected 15992 15992000" in caught.value.reason
