"""The contract every target keeps, run against each real system at the smallest size; and a changed knob reaches
the system: read back from the system itself (tests/readback.py), so a driver that drops one fails by its name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from knobtune.errors import WorkloadError
from knobtune.knobs import Value, load_catalog
from knobtune.targets import Measurement, RunFailure
from knobtune.systems import TARGETS, capturing, export_formats, make_target, workload_section
from knobtune.tuning.proof import Candidate, run_interleaved
from knobtune.workloads import load_workload

from conftest import CORPUS, tiny
from readback import READBACK, changed_config, same, watch

PAIRS = sorted(TARGETS)


def _runs(system: str, driver: str, workload) -> bool:  # noqa: ANN001
    try:
        workload_section(system, driver, workload)
    except WorkloadError:
        return False
    return True


# a capture of each system's own work, made from the corpus (log or trace, state, nondeterministic columns)
CAPTURES = {"postgresql": ("tiny.csv", "tiny-dump.sql", ("items.touched",))}


def _capture(system: str, folder: Path):
    """A capture folder of ``system`` made from the corpus's tiny record of real work (the replay driver's workload);
    a system without one in the corpus captures a tiny run of a workload it knows (RocksDB: kvbench, traced)."""
    if system not in CAPTURES:
        capturing(system).from_workload(tiny("ycsb-a", 1000), folder, "tiny", None)
        return load_workload(folder)
    source, state, nondeterministic = CAPTURES[system]
    corpus = CORPUS / "captures" / system
    capturing(system).from_files(corpus / source, corpus / state, folder, "tiny")  # checks it, as a user's would be
    if nondeterministic:
        path = folder / "capture.toml"
        path.write_text(path.read_text().replace("nondeterministic = []",
                                                 f"nondeterministic = {list(nondeterministic)!r}"
                                                 .replace("'", '"')))
    return load_workload(folder)


def _workload(system: str, driver: str, tmp_path: Path | None = None):
    """A shipped workload the pair runs, at 1,000 records; a capture for the replay driver; else the corpus's tiny
    analytic one (scale factor 0.01)."""
    if driver == "replay" and tmp_path is not None:
        return _capture(system, tmp_path / "tiny.capture")
    name = next((n for n in ("put-get-delete", "ycsb-a", "pgbench-tpcb", "oltp_point_select")
                 if _runs(system, driver, load_workload(n))),
                None)
    return tiny(name, 1000) if name else load_workload(CORPUS / "workloads" / "tpch-tiny.toml")


@dataclass(frozen=True)
class PairRan:
    """One (system, driver) opened once and run twice at its smallest rung as a study runs it: under the default
    config, then under a config that changes a few knobs (``readback.changed_config``), read back from the system
    itself while that run went (``readback.watch``)."""

    system: str
    driver: str
    shape: dict[str, float | bool]
    default: Measurement
    changed: dict[str, Value]  # the knobs the second run changed, at their values
    second: Measurement | RunFailure  # the second run (a failure kept for the tests to say)
    held: list[dict[str, object]]  # what the system held of the changed knobs, at each read (the last: the run's)
    scratch_left: bool
    formats: list[str]


# a Cassandra node takes about 30 s to start, a MariaDB server with its load about 6 s: their pairs run in the full
# suite, not the quick lane
_SLOW_TO_START = {"cassandra", "mariadb"}


@pytest.fixture(scope="module", params=[pytest.param(pair, marks=pytest.mark.slow) if pair[0] in _SLOW_TO_START
                                        else pair for pair in PAIRS], ids=[f"{s}-{d}" for s, d in PAIRS])
def pair_ran(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PairRan:
    system, driver = request.param
    tmp_path = tmp_path_factory.mktemp(f"{system}-{driver}")
    catalog = load_catalog(system)
    workload = _workload(system, driver, tmp_path)
    target = make_target(catalog, workload, tmp_path / "scratch", driver)
    assert target.installed(), f"{driver} should be installed by the set-up"
    shape = target.workload_facts().shape()  # what the diagnosis rules read before a study's first run
    changed = catalog.changed(changed_config(catalog, driver, target.impossible_values()))
    with target:
        target.open()  # idempotent
        default = target.run(catalog.defaults(), workload.rungs[0], timeout_s=60, log_path=tmp_path / "a.log",
                             seed=1)
        held = watch(target, sorted(changed))
        second: Measurement | RunFailure
        try:
            second = target.run(catalog.config(changed), workload.rungs[0], timeout_s=60, log_path=tmp_path / "b.log",
                                seed=1)  # as a trial runs its config at its first rung
        except RunFailure as failure:
            second = failure
    target.close()  # idempotent
    return PairRan(system, driver, shape, default, changed, second, held, (tmp_path / "scratch").exists(),
                   [f.name for f in export_formats(system, driver)])


def test_open_apply_run_close(pair_ran: PairRan) -> None:
    assert pair_ran.shape["clients"] >= 1 and (pair_ran.shape["reads"] or pair_ran.shape["writes"])
    assert isinstance(pair_ran.second, Measurement), f"the run under a changed config failed: {pair_ran.second}"
    for measurement in (pair_ran.default, pair_ran.second):
        assert measurement.settle is not None and measurement.elapsed_s > measurement.workload_s > 0
        assert measurement.peak_rss_bytes and measurement.peak_rss_bytes > 1_000_000
    assert not pair_ran.scratch_left
    assert pair_ran.formats, "every target exports to some format"


def test_a_changed_knob_reaches_the_system(pair_ran: PairRan) -> None:
    """Every knob the second run changed is what the system itself held in that run, read from the system (what
    each reads: ``readback.READBACK``); a driver that drops a knob, or sends another value, fails here by name."""
    catalog = load_catalog(pair_ran.system)
    assert len(pair_ran.changed) >= 5, f"a few knobs of several types: {pair_ran.changed}"
    assert isinstance(pair_ran.second, Measurement), f"the run under the changed config failed: {pair_ran.second}"
    assert pair_ran.held, "the system was read while the run went"
    held, source = pair_ran.held[-1], READBACK[pair_ran.system].source
    wrong = {name: held.get(name, "nothing") for name, value in pair_ran.changed.items()
             if name not in held or not same(catalog.knobs[name], held[name], value)}
    assert not wrong, "; ".join(f"{name} = {pair_ran.changed[name]!r} was set through {pair_ran.driver}, but "
                                f"{pair_ran.system} held {found!r} ({source})" for name, found in wrong.items())


@pytest.mark.parametrize(("system", "driver"), PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_twin_is_the_workloads_verifiable_twin_or_none(system: str, driver: str, tmp_path: Path) -> None:
    catalog = load_catalog(system)
    with_twin = load_workload("fillrandom").scaled(1000)
    if _runs(system, driver, with_twin):
        twin = make_target(catalog, with_twin, tmp_path / "scratch", driver).twin()
        assert twin is not None and twin.driver == driver and twin.settle
    assert make_target(catalog, _workload(system, driver, tmp_path), tmp_path / "s2", driver).twin() is None


def test_a_config_the_driver_cannot_take_is_a_refusal_not_an_error(tmp_path: Path) -> None:
    """kvbench cannot set RocksDB's row cache: the run refuses, and a comparison records why and goes on."""
    catalog = load_catalog("rocksdb")
    workload = tiny("put-get-delete", 1000)
    with make_target(catalog, workload, tmp_path / "scratch", "kvbench") as target:
        with pytest.raises(RunFailure, match="row_cache_size cannot be set through kvbench"):
            target.run(catalog.config({"row_cache_size": "64MiB"}), workload.rungs[0], timeout_s=60,
                       log_path=tmp_path / "refused.log", seed=1)
        comparison = run_interleaved(
            target, [(Candidate("default", {}), catalog.defaults()),
                     (Candidate("row cache", {"row_cache_size": "64MiB"}),
                      catalog.config({"row_cache_size": "64MiB"}))],
            workload.rungs[0], repeats=1, objective=workload.objective, seed=1, log_dir=tmp_path / "logs")
    assert comparison.runs[0].values and str(comparison.runs[1].failure).startswith("row_cache_size cannot be set")
