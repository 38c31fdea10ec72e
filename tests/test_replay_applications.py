"""Applications written as users write them (tests/apps/shop.py: SQLAlchemy's ORM and psycopg 3, 8 concurrent
clients, ids read back and used again, foreign keys, commuting stock updates), captured as docs/replay.md says
and replayed: the ids the replay's server generates are sent in place of the captured ones."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from knobtune.cli import run
from knobtune.errors import WorkloadError
from knobtune.knobs import load_catalog
from knobtune.report.sections import Costs, Default, Replay, TimeSpent, Trials
from knobtune.report.summary_text import replay_lines
from knobtune.storage import open_store
from knobtune.systems import make_target
from knobtune.systems.postgresql import capture
from knobtune.systems.postgresql.generated import Keys, map_ids
from knobtune.systems.postgresql.pglog import read_log
from knobtune.systems.postgresql.replay import PostgresReplayTarget, find_replayer
from knobtune.systems.postgresql.server import PG_BIN
from knobtune.systems.postgresql.sqlshape import shape
from knobtune.targets import FailureKind, RunFailure
from knobtune.tuning import Experiment, Tuner, attrs, build_space
from knobtune.workloads import Objective, load_workload
from knobtune.workloads.capture import sha256_of

from apps import shop
from conftest import cache_of_its_own
from apps.capturing import capture_application

pytestmark = pytest.mark.skipif(not (PG_BIN / "postgres").exists(), reason="PostgreSQL 15 is not installed")
CLIENTS, ORDERS = 8, 12
LONG_STATEMENT_BYTES = 200_000


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """Every capture here is new (its dump differs): its restored copy goes to a cache of this module's own."""
    with cache_of_its_own(tmp_path_factory.mktemp("cache")):
        yield


def _run_with_a_long_statement(client: str):
    def run(dsn: str) -> None:
        shop.run(dsn, client, clients=CLIENTS, orders=ORDERS)
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:  # an ORM's batch can be this long: read whole
            conn.execute("SELECT length('" + "x" * LONG_STATEMENT_BYTES + "')")  # type: ignore[arg-type]
    return run


@pytest.fixture(scope="module", params=["orm", "psycopg"])
def captured(request, tmp_path_factory) -> Path:
    find_replayer()
    folder = tmp_path_factory.mktemp(request.param)
    capture_application(shop.create, _run_with_a_long_statement(request.param), folder, f"shop-{request.param}",
                        shop.NONDETERMINISTIC)
    return folder / f"shop-{request.param}.capture"


def _fast(workload, pace: str = "fast"):
    return dataclasses.replace(workload, drivers={"replay": {**workload.drivers["replay"], "pace": pace}},
                               objective=Objective.ELAPSED_S)


def test_capture_says_which_statements_generate_keys_and_reads_a_long_statement_whole(captured: Path) -> None:
    summary = load_workload(captured).capture
    note = next(n for n in summary.notes if "generate keys" in n)
    assert f"{CLIENTS * ORDERS:,} of their values are used again" in note  # every order's id
    assert "new key no statement" not in note, "every id the application used again is mapped"
    parsed = read_log(captured / capture.LOG_FILE)
    assert max(len(s.text) for s in parsed.statements) > LONG_STATEMENT_BYTES


@pytest.mark.slow
def test_the_defaults_replays_agree_and_fail_no_statement_at_the_captured_and_the_think_pace(
        captured: Path, tmp_path: Path) -> None:
    postgresql = load_catalog("postgresql")
    workload = load_workload(captured)
    for replayed in (workload, _fast(workload, "think")):
        pace = replayed.drivers["replay"]["pace"]
        with make_target(postgresql, replayed, tmp_path / pace, driver="replay") as target:
            for run in range(2):  # the second is checked against the first: every table agrees through the id map
                measurement = target.run(postgresql.defaults(), replayed.full, timeout_s=300,
                                         log_path=tmp_path / f"{pace}-{run}.log", seed=1)
                counters = measurement.counters
                assert counters["replay_failed_statements"] <= 0.001 * replayed.full.records
                assert counters["replay_remapped_values"] > CLIENTS * ORDERS
                assert counters["replay_unmapped_waits"] == 0
                ids = tmp_path / f"{pace}-{run}.ids"  # the keys the replay made: values of the user's tables
                assert ids.stat().st_size > 0 and ids.stat().st_mode & 0o077 == 0


@pytest.mark.slow
def test_without_the_id_map_the_defaults_replay_is_refused_naming_sqlstates_and_fingerprints(
        captured: Path, tmp_path: Path) -> None:
    """The captured ids sent as literals (what the replay did before): concurrent sessions draw other ids, items
    point at other sessions' orders or at none, and the default's replay is refused before any search."""
    copy = tmp_path / "literal.capture"
    copy.mkdir(mode=0o700)
    for item in captured.iterdir():
        (copy / item.name).write_bytes(item.read_bytes())
        (copy / item.name).chmod(0o600)
    before = sha256_of(copy / capture.STATEMENTS_FILE)
    capture.write_statements(read_log(copy / capture.LOG_FILE), copy / capture.STATEMENTS_FILE)
    toml = copy / "capture.toml"  # the file as this test wrote it: its digest too, as capture would have
    toml.write_text(toml.read_text().replace(before, sha256_of(copy / capture.STATEMENTS_FILE)))
    postgresql = load_catalog("postgresql")
    workload = _fast(load_workload(copy))
    with make_target(postgresql, workload, tmp_path / "scratch", driver="replay") as target:
        with pytest.raises(RunFailure) as refused:
            target.run(postgresql.defaults(), workload.full, timeout_s=300, log_path=tmp_path / "default.log", seed=1)
    failure = refused.value
    assert failure.kind is FailureKind.TOOL and "\n" not in failure.reason and failure.fix.startswith("Fix:")
    assert "above 1%" in failure.reason and ("23503" in failure.reason or "25P02" in failure.reason)
    assert "INSERT INTO" in failure.reason or "UPDATE" in failure.reason  # fingerprints, never parameters


@pytest.mark.slow
def test_a_tune_on_each_application_ends_with_a_verified_verdict(captured: Path, tmp_path: Path) -> None:
    postgresql = load_catalog("postgresql")
    workload = dataclasses.replace(_fast(load_workload(captured)), ladder=(1.0,))  # every config verified
    settings = Experiment.of(study="shop", catalog=postgresql, workload=workload,
                             space=build_space(postgresql, ["shared_buffers", "work_mem", "random_page_cost"]),
                             search__sampler="random", search__seed=2, budget__trials=2, proof__verify_top=1,
                             proof__repeats=2, measurement__control_every=0, measurement__timeout_factor=20,
                             research__rules=False, research__try_known_configs=False)  # runs of seconds: no timeouts
    study = Tuner(settings, open_store(tmp_path / "studies")).run()
    outcomes = [t.user_attrs.get(attrs.OUTCOME) for t in study.trials]
    assert "tool" not in outcomes, [t.user_attrs.get(attrs.REASON) for t in study.trials]
    verification = study.user_attrs[attrs.VERIFICATION]
    assert verification["candidates"], verification["verdict"]  # a candidate verified against the default
    assert "interleaved" in verification["verdict"]


# ---------------------------------------------------------------- what capture reads, without a server


def test_the_statements_orms_send_bind_their_values_to_columns() -> None:
    orm_items = ("INSERT INTO order_items (order_id, product_id, qty) SELECT p0::BIGINT, p1::INTEGER, p2::INTEGER "
                 "FROM (VALUES ($1::BIGINT, $2::INTEGER, $3::INTEGER, 0), ($4::BIGINT, $5::INTEGER, $6::INTEGER, 1)) "
                 "AS imp_sen(p0, p1, p2, sen_counter) ORDER BY sen_counter RETURNING order_items.id, "
                 "order_items.id AS id__1")
    items = shape(orm_items)
    assert items.insert_into == "public.order_items" and items.rows == 2 and items.returning[0] == "id"
    assert [(b.value.param, b.column) for b in items.bindings if b.column == "order_id"] == [(0, "order_id"),
                                                                                              (3, "order_id")]
    lazy = shape("SELECT order_items.id FROM order_items WHERE $1::BIGINT = order_items.order_id")
    assert [(b.table, b.column, b.value.param) for b in lazy.bindings] == [("public.order_items", "order_id", 0)]
    update = shape('UPDATE orders SET total=$1::NUMERIC(12, 2) WHERE orders.id = $2::BIGINT')
    assert ("public.orders", "id", 1) in [(b.table, b.column, b.value.param) for b in update.bindings]
    literal = shape("select * from order_items oi join orders o on o.id = oi.order_id where o.id = 42")
    assert [(b.table, b.column, b.value.text) for b in literal.bindings] == [("public.orders", "id", "42")]
    assert shape("SELECT nextval('public.orders_id_seq')").sequence_call == ("nextval", "public.orders_id_seq")
    assert not shape("INSERT INTO t VALUES (1); SELECT 1").single


KEYS = Keys({"public.orders": ("id", "public.orders_id_seq", 100)},
            {("public.order_items", "order_id"): "public.orders"})


def test_a_multi_row_insert_claims_its_rows_in_the_order_the_sequence_hands_them_out() -> None:
    statements = [
        (0, "INSERT INTO orders (status) VALUES ($1), ($2) RETURNING id", ("a", "b"), "u"),
        (0, "INSERT INTO order_items (order_id, qty) VALUES ($1, 1)", ("102",), "u"),
        (0, "INSERT INTO order_items (order_id, qty) VALUES ($1, 1)", ("101",), "u"),
        (1, "UPDATE orders SET status = 'x' WHERE id = $1", ("102",), "p"),  # another session uses it
        (1, "UPDATE orders SET status = 'x' WHERE id = $1", ("7",), "p"),  # a key the dump holds: as captured
        (1, "UPDATE orders SET status = 'x' WHERE id = 150", (), "s"),  # a new key no statement of its made
    ]
    ids = map_ids(statements, KEYS)
    (generator,) = ids.generators.values()
    assert generator.claimed == [101, 102] and [ids.captured[s] for s in generator.slots] == [101, 102]
    assert [r.slot for r in ids.references[3]] == [generator.slots[1]]
    assert 4 not in ids.references and ids.unmapped_statements == 1
    assert "1 statements use a new key" in (ids.note() or "")


def test_an_insert_without_returning_is_sent_with_its_key_returned(tmp_path: Path) -> None:
    statements = [(0, "INSERT INTO orders (status) VALUES ('new');", (), "s"),
                  (0, "SELECT currval('orders_id_seq')", (), "s"),
                  (0, "DELETE FROM order_items WHERE order_id = 101", (), "s")]
    ids = map_ids(statements, KEYS)
    assert ids.generators[0].append == ' RETURNING "id"'
    assert ids.generators[1].claimed == [101], "currval is what the application read"
    assert ids.references[2][0].value.text == "101"


@pytest.mark.parametrize("speed,said", [(0, "not a positive number"), (-2, "not a positive number"),
                                        ("2", "is not a number"), (1000, "is above 100"), (True, "is not a number")])
def test_a_speed_that_cannot_be_meant_is_refused_in_one_line(captured: Path, tmp_path: Path, speed, said) -> None:
    workload = load_workload(captured)
    sped = dataclasses.replace(workload, drivers={"replay": {**workload.drivers["replay"], "speed": speed}})
    with pytest.raises(WorkloadError) as refused:
        PostgresReplayTarget(load_catalog("postgresql"), sped, tmp_path / "scratch")
    assert said in str(refused.value) and "Fix:" in str(refused.value) and "\n" not in str(refused.value)
    fast = _fast(dataclasses.replace(workload, drivers={"replay": {**workload.drivers["replay"], "speed": 2}}))
    with pytest.raises(WorkloadError, match="pace = \"fast\""):
        PostgresReplayTarget(load_catalog("postgresql"), fast, tmp_path / "scratch")


def test_show_says_what_a_full_size_replay_costs_and_how_many_the_budget_holds(captured: Path) -> None:
    summary = load_workload(captured).capture
    costs = Costs(costs={"default": {"workload_s": 61.0, "settle_s": 4.0}})
    trials = Trials(counts={}, time_spent=TimeSpent(search_s=900.0, verification_s=300.0, budget_s=1200.0))
    lines = [str(line) for line in replay_lines(Replay(summary), Default(), costs, trials)]
    assert "a full-size replay of the default costs 65.0 s (replay 61.0 s + settle 4.0 s" in lines[-1]
    assert "the budget of 1,200 s holds at most 18 such runs" in lines[-1]
    assert any("generate keys" in line for line in lines)


# ---------------------------------------------------------------- a capture is checked, not trusted


def _copy(captured: Path, into: Path) -> Path:
    into.mkdir(mode=0o700)
    for item in captured.iterdir():
        (into / item.name).write_bytes(item.read_bytes())
        (into / item.name).chmod(0o600)
    return into


def _edited(folder: Path, old: str, new: str) -> None:
    toml = folder / "capture.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("old,new,said", [
    ('pace = "captured"', 'paec = "captured"', "unknown field 'paec' (did you mean 'pace'?)"),
    ('pace = "captured"', 'pace = "captured"\nthreads = 0', "unknown field 'threads'"),
    ('dump_format = "custom"', 'dump_format = "tar"', "is not a dump format knobtune restores"),
    ('statements = "replay.dat"', 'statements = "../replay.dat"', "is not a file of the capture folder"),
    ('statements = "replay.dat"', 'statements = "gone.dat"', "is not a file in"),
    ('nondeterministic = ["orders.created_at"]', 'nondeterministic = "orders.created_at"', "not a list of names"),
])
def test_a_misspelt_or_impossible_replay_section_is_refused_in_one_line(captured: Path, tmp_path: Path, old: str,
                                                                        new: str, said: str) -> None:
    folder = _copy(captured, tmp_path / "edited.capture")
    _edited(folder, old, new)
    with pytest.raises(WorkloadError) as refused:
        PostgresReplayTarget(load_catalog("postgresql"), load_workload(folder), tmp_path / "scratch")
    message = str(refused.value)
    assert said in message and "Fix:" in message and "\n" not in message, message


def test_a_capture_file_changed_since_or_not_a_regular_file_is_refused(captured: Path, tmp_path: Path) -> None:
    changed = _copy(captured, tmp_path / "changed.capture")
    with (changed / capture.STATEMENTS_FILE).open("ab") as data:
        data.write(b"\n")
    fifo = _copy(captured, tmp_path / "fifo.capture")
    (fifo / capture.STATEMENTS_FILE).unlink()
    os.mkfifo(fifo / capture.STATEMENTS_FILE, 0o600)
    linked = _copy(captured, tmp_path / "linked.capture")
    (linked / capture.STATEMENTS_FILE).unlink()
    (linked / capture.STATEMENTS_FILE).symlink_to(captured / capture.STATEMENTS_FILE)
    for folder, said in ((changed, "SHA-256 differs"), (fifo, "not a regular file"), (linked, "is a link")):
        with pytest.raises(WorkloadError, match=said):
            PostgresReplayTarget(load_catalog("postgresql"), load_workload(folder), tmp_path / "scratch")


def test_records_and_an_objective_that_override_the_captures_own_are_refused(captured: Path, tmp_path: Path,
                                                                           capsys) -> None:
    home = tmp_path / "studies"
    for extra, said in ((["--records", "10"], "a capture replays what it captured"),
                        (["--objective", "elapsed_s"], "a capture's objective goes with its pace")):
        code = run(["tune", "postgresql", "--workload", str(captured), "--trials", "1", "--dir", str(home), *extra])
        error = capsys.readouterr().err
        assert code == 2 and said in error and error.count("\n") == 1, error
        assert not home.exists()


@pytest.mark.slow
def test_nondeterministic_names_the_database_does_not_have_stop_the_defaults_first_replay(
        captured: Path, tmp_path: Path) -> None:
    folder = _copy(captured, tmp_path / "named.capture")
    _edited(folder, 'nondeterministic = ["orders.created_at"]', 'nondeterministic = ["orders.created_at", '
                                                                  '"order.status"]')
    postgresql = load_catalog("postgresql")
    workload = _fast(load_workload(folder))
    with make_target(postgresql, workload, tmp_path / "scratch", driver="replay") as target:
        with pytest.raises(RunFailure) as refused:
            target.run(postgresql.defaults(), workload.rungs[0], timeout_s=300, log_path=tmp_path / "d.log", seed=1)
    assert refused.value.kind is FailureKind.TOOL and "order.status" in refused.value.reason
    assert "orders.created_at" not in refused.value.reason.split("(its tables")[0]


def test_an_id_first_used_after_a_later_insert_is_claimed_by_the_insert_that_made_it() -> None:
    statements = [
        (0, "INSERT INTO orders (status) VALUES ($1) RETURNING id", ("a",), "u"),
        (0, "INSERT INTO orders (status) VALUES ($1) RETURNING id", ("b",), "u"),
        (0, "UPDATE orders SET status = 'x' WHERE id = $1", ("106",), "u"),  # the second order's
        (0, "UPDATE orders SET status = 'x' WHERE id = $1", ("105",), "u"),  # the first order's, used only now
        (0, "UPDATE orders SET status = 'x' WHERE id = $1", ("104",), "u"),  # neither: below both, unmapped
    ]
    ids = map_ids(statements, KEYS)
    assert ids.generators[1].claimed == [106] and ids.generators[0].claimed == [105]
    assert ids.unmapped_statements == 1


def test_a_sessions_think_time_is_the_gap_between_its_statements_in_the_capture() -> None:
    from knobtune.systems.postgresql.pglog import ParsedLog, Session, Statement

    first, second, third = (Statement(0, 0, "s", "", "BEGIN", duration_us=100),
                            Statement(0, 1000, "s", "", "SELECT 1", duration_us=300),
                            Statement(0, 1200, "s", "", "COMMIT", duration_us=None))
    parsed = ParsedLog((Session(0, "k", "db", "app", 0, 2000, [first, second, third]),), (first, second, third),
                       ("db",), ())
    think = capture.think_times(parsed)
    assert think == {id(second): 900, id(third): 0}  # a statement that began before its previous ended waits none
