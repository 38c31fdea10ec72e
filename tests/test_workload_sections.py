"""A workload's pgbench, sysbench and kvbench sections read through the schema: a misspelt field (``cleints``,
``chekc``) or a wrong type at any depth is refused in one line naming the file, the field and the fix, as the command
line asks for the section before anything is made; every shipped workload's section still reads as it did."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from knobtune.drivers.kvbench_phases import read_section as read_kvbench
from knobtune.errors import WorkloadError
from knobtune.systems import workload_section
from knobtune.systems.postgresql.pgbench import PgbenchSection, read_section
from knobtune.systems.rocksdb.db_bench_workload import knob_flags
from knobtune.systems.rocksdb.db_bench_workload import read_section as read_db_bench
from knobtune.workloads import load_workload

WORKLOADS = Path(__file__).resolve().parents[1] / "knobtune" / "workloads" / "data"
PGBENCH = sorted(p.stem for p in WORKLOADS.glob("*.toml") if "[drivers.pgbench]" in p.read_text())
SYSBENCH = sorted(p.stem for p in WORKLOADS.glob("*.toml") if "[drivers.sysbench]" in p.read_text())
DB_BENCH = sorted(p.stem for p in WORKLOADS.glob("*.toml") if "[drivers.db_bench]" in p.read_text())
KVBENCH = sorted(p.stem for p in WORKLOADS.glob("*.toml") if "[drivers.kvbench]" in p.read_text())


def _broken(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """The shipped workload ``name`` with ``old`` replaced by ``new``, as a user's file."""
    text = (WORKLOADS / f"{name}.toml").read_text()
    assert old in text, old
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace(old, new, 1))
    return path


PGBENCH_BROKEN = [  # (workload, what is replaced, by what, the one line)
    ("pgbench-tpcb", "clients = 8", "cleints = 8", r"unknown field 'cleints' \(did you mean 'clients'\?\)"),
    ("pgbench-tpcb", 'check = "tpcb"', 'chekc = "tpcb"', r"unknown field 'chekc' \(did you mean 'check'\?\)"),
    ("pgbench-tpcb", "scale = 50", 'scale = "big"', r"scale 'big' is not a whole number. Fix: e.g. scale = 50"),
    ("pgbench-tpcb", "clients = 8", "clients = 0", r"clients 0 is below 1. Fix: e.g. clients = 8"),
    ("pgbench-tpcb", "threads = 2", "threads = 2.5", r"threads 2.5 is not a whole number"),
    ("pgbench-tpcb", 'check = "tpcb"', 'check = "tpcbb"', r"check 'tpcbb' is not a data check .*did you mean 'tpcb'"),
    ("pgbench-select", 'script = "select-only"', 'script = "select"',
     r"script 'select' is not a pgbench built-in script .*did you mean 'select-only'"),
    ("ycsb-a", "ycsb-update = 0.5", "ycsb-update = -0.5", r"scripts.ycsb-update '-0.5' is not a positive number"),
    ("ycsb-a", "ycsb-update = 0.5", 'ycsb-update = "half"', r"scripts.ycsb-update 'half' is not a number"),
    ("ycsb-a", "ycsb-update = 0.5", "ycsb-updat = 0.5", r"scripts.ycsb-updat: pgbench script 'ycsb-updat' is not in"),
    ("tpcc", 'load = "tpcc"', 'load = "tpc"', r"load 'tpc' is not a loader \(did you mean 'tpcc'\?\)"),
]


@pytest.mark.parametrize(("name", "old", "new", "message"), PGBENCH_BROKEN,
                         ids=[f"{n}-{re.sub(r'[^a-z]+', '-', m[:30])}" for n, _, _, m in PGBENCH_BROKEN])
def test_a_broken_pgbench_section_gets_one_line_before_anything_is_made(tmp_path, name, old, new, message) -> None:
    path = _broken(tmp_path, name, old, new)
    with pytest.raises(WorkloadError) as caught:
        workload_section("postgresql", "pgbench", load_workload(path))
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text), text
    assert text.startswith(f"{path}: [drivers.pgbench]") and "Fix: " in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


SYSBENCH_BROKEN = [  # (what is replaced, by what, the one line): oltp_read_write
    ("clients = 8", "cleints = 8",
     r"unknown field 'cleints' \(did you mean 'clients'\?\): no argv or expression names it. Fix: remove it"),
    ("[drivers.sysbench.check]", "[drivers.sysbench.chekc]",
     r"unknown field 'chekc' \(did you mean 'check'\?\). Fix: remove it"),
    ("clients = 8", "clients = 0", r"clients 0 is below 1. Fix: e.g. clients = 8"),
    ("clients = 8", 'clients = "eight"', r"clients 'eight' is not a whole number"),
    ('operations = "transactions:\\\\s+(\\\\d+)"', "operations = 5", r"operations 5 is not text"),
    ("[drivers.sysbench.check]\n", "[drivers.sysbench.check]\nexpcet = []\n",
     r"unknown field 'check.expcet' \(did you mean 'expect'\?\)"),
    ("tables = 8", "tables = [8]", r"unknown field 'tables'.*a field of its own is a number or text"),
]


@pytest.mark.parametrize(("old", "new", "message"), SYSBENCH_BROKEN,
                         ids=[re.sub(r"[^a-z]+", "-", m[:30]) for _, _, m in SYSBENCH_BROKEN])
@pytest.mark.parametrize("system", ["postgresql", "mariadb"])
def test_a_broken_sysbench_section_gets_one_line_before_anything_is_made(tmp_path, system, old, new,
                                                                         message) -> None:
    path = _broken(tmp_path, "oltp_read_write", old, new)
    try:
        workload = load_workload(path)
    except WorkloadError as exc:  # some breakages are the workload file's own (a bad TOML line): one line too
        assert "\n" not in str(exc) and "Fix:" in str(exc)
        return
    with pytest.raises(WorkloadError) as caught:
        workload_section(system, "sysbench", workload)
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text), text
    assert text.startswith(f"{path}: [drivers.sysbench]") and "Fix: " in text


@pytest.mark.parametrize(("check", "message"), [
    ({"sql": 3, "expect": ["tables"]}, r"check.sql 3 is not text. Fix: e.g. sql = "),
    ({"sql": "SELECT 1", "expect": ["tables"], "expcet": []}, r"unknown field 'check.expcet' \(did you mean 'expect'"),
    ({"expect": ["tables"]}, r"no 'check.sql'. Fix: add it, e.g. sql = \"SELECT COUNT\(\*\) FROM t\""),
    ("SELECT 1", r"check is not a table"),
])
def test_a_broken_sysbench_check_gets_one_line(check: object, message: str) -> None:
    workload = load_workload("oltp_read_write")
    broken = dataclasses.replace(workload, drivers={"sysbench": {**workload.drivers["sysbench"], "check": check}})
    with pytest.raises(WorkloadError) as caught:
        workload_section("mariadb", "sysbench", broken)
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text) and "Fix: " in text, text


def test_several_problems_in_a_section_are_each_one_line(tmp_path) -> None:
    path = _broken(tmp_path, "pgbench-tpcb", "clients = 8", 'cleints = 8\nscale = "big"\nclients = 0')
    path.write_text(path.read_text().replace("scale = 50", "", 1))
    with pytest.raises(WorkloadError) as caught:
        workload_section("postgresql", "pgbench", load_workload(path))
    lines = str(caught.value).splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{path}: ") and "Fix:" in line for line in lines), lines


@pytest.mark.parametrize("name", PGBENCH)
def test_every_shipped_pgbench_section_reads(name: str) -> None:
    workload = load_workload(name)
    section = read_section(workload)
    assert isinstance(section, PgbenchSection) and section.clients >= 1 and section.scale >= 1
    assert section.check is not None or not workload.drivers["pgbench"].get("check")
    assert workload_section("postgresql", "pgbench", workload) == workload.drivers["pgbench"]


@pytest.mark.parametrize("name", SYSBENCH)
@pytest.mark.parametrize("system", ["postgresql", "mariadb"])
def test_every_shipped_sysbench_section_reads(system: str, name: str) -> None:
    workload = load_workload(name)
    assert workload_section(system, "sysbench", workload) == workload.drivers["sysbench"]


KVBENCH_BROKEN = [  # (what is replaced in ycsb-a, by what, the one line after the file and the section)
    ('measure = ["run"]', 'measure = ["run"]\nthread = 2',
     "unknown field 'thread' (did you mean 'threads'?). Fix: remove it, or use one of phases, twin, measure, threads"),
    ('measure = ["run"]', 'measure = "run"', "measure 'run' is not a list of names. Fix: e.g. measure = [\"run\"]"),
    ('expect = "all"', 'expct = "all"', "unknown field 'phases #2.expct' (did you mean 'expect'?). Fix: remove it, or "
                                          "use one of name, kind, order, count, distribution, zipfian_constant, "
                                          "scan_length_min, scan_length_max, mix, expect"),
    ("scan_length_max = 100", "scan_length_max = 0", "phases #2.scan_length_max 0 is below 1. Fix: e.g. "
                                                      "scan_length_max = 100"),
    ('order = "shuffled"', "order = 3", "phases #1.order 3 is not text. Fix: use one of sequential, shuffled, random"),
    ("update = 0.5", "updte = 0.5", "unknown field 'phases #2.mix.updte' (did you mean 'update'?). Fix: remove it, "
                                    "or use one of read, update, insert, scan, scan_reverse, rmw"),
    ("update = 0.5", 'update = "half"', "phases #2.mix.update 'half' is not a number. Fix: e.g. update = 0.5"),
    ("update = 0.5", "update = 1.5", "phases #2.mix.update 1.5 is above 1. Fix: e.g. update = 0.5"),
]


@pytest.mark.parametrize(("old", "new", "said"), KVBENCH_BROKEN, ids=[re.sub(r"[^a-z]+", "-", m[:30]) for _, _, m
                                                                      in KVBENCH_BROKEN])
@pytest.mark.parametrize("system", ["rocksdb", "leveldb"])
def test_a_broken_kvbench_section_gets_the_schemas_one_line(tmp_path, system, old, new, said) -> None:
    path = _broken(tmp_path, "ycsb-a", old, new)
    with pytest.raises(WorkloadError) as caught:
        workload_section(system, "kvbench", load_workload(path))
    assert str(caught.value) == f"{path}: [drivers.kvbench]: {said}"


@pytest.mark.parametrize("name", KVBENCH)
@pytest.mark.parametrize("system", ["rocksdb", "leveldb"])
def test_every_shipped_kvbench_section_reads(system: str, name: str) -> None:
    workload = load_workload(name)
    if workload.systems and system not in workload.systems:
        return
    assert workload_section(system, "kvbench", workload) == workload.drivers["kvbench"]
    assert read_kvbench(workload).phases


DB_BENCH_BROKEN = [  # (the section after [drivers.db_bench], the one line after the file and the section)
    ('benchmarks = ["fillrandom"]\nmeasur = ["fillrandom"]',
     "unknown field 'measur' (did you mean 'measure'?). Fix: remove it, or use one of benchmarks, measure, verify, "
     "twin, threads, flags"),
    ('benchmarks = "fillrandom"', "benchmarks 'fillrandom' is not a list of names. Fix: e.g. benchmarks = "
                                  '["filluniquerandom", "readrandom"]'),
    ('benchmarks = []', 'benchmarks is an empty list. Fix: e.g. benchmarks = ["filluniquerandom", "readrandom"]'),
    ('benchmarks = ["fillrandom"]\nthreads = "4"', "threads '4' is not a whole number. Fix: e.g. threads = 4"),
    ('benchmarks = ["fillrandom"]\nflags = { readwritepercnt = 50 }',
     "unknown field 'flags.readwritepercnt' (did you mean 'readwritepercent'?). Fix: remove it, or use one of "
     "readwritepercent, deletepercent, numdistinct, keys_per_prefix, seek_nexts, reverse_iterator, "
     "read_random_exp_range, compression_ratio, batch_size, multiread_batched"),
    ('benchmarks = ["seekrandom"]\nflags = { reverse_iterator = 1 }',
     "flags.reverse_iterator 1 is not true or false. Fix: e.g. reverse_iterator = true (the seek benchmarks step "
     "with Prev() instead of Next())"),
    ('benchmarks = ["fillrandom"]\nflags = { compression_ratio = 0 }',
     "flags.compression_ratio 0 is not a positive number. Fix: e.g. compression_ratio = 0.5 (the fraction values "
     "shrink to when compressed)"),
]


@pytest.mark.parametrize(("section", "said"), DB_BENCH_BROKEN, ids=[re.sub(r"[^a-z]+", "-", m[:30]) for _, m
                                                                    in DB_BENCH_BROKEN])
def test_a_broken_db_bench_section_gets_the_schemas_one_line(tmp_path, section, said) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(f'name = "mine"\nsystems = ["rocksdb"]\nrecords = 2000\nladder = [1.0]\n[drivers.db_bench]\n'
                    f"{section}\n")
    with pytest.raises(WorkloadError) as caught:
        workload_section("rocksdb", "db_bench", load_workload(path))
    assert str(caught.value) == f"{path}: [drivers.db_bench]: {said}"


@pytest.mark.parametrize("name", DB_BENCH)
def test_every_shipped_db_bench_section_reads(name: str) -> None:
    workload = load_workload(name)
    section = workload.drivers["db_bench"]
    assert workload_section("rocksdb", "db_bench", workload) == section
    flags = read_db_bench(workload, section, knob_flags("rocksdb"))
    assert flags.threads == section.get("threads", 1) and len(flags.flags) == len(section.get("flags", {}))


def test_shipped_workloads_of_each_kind_exist() -> None:
    assert len(PGBENCH) >= 5 and len(SYSBENCH) >= 3 and len(KVBENCH) >= 8 and len(DB_BENCH) >= 5
