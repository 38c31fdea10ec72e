"""A workload's db_bench section: ``threads`` (a rung's work shared out over db_bench's threads) and ``flags``
(db_bench's own workload flags from a fixed list), run against the real db_bench at small sizes; what is refused,
each in one line naming the file, the field and the fix."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from knobtune.errors import WorkloadError
from knobtune.systems import make_target
from knobtune.systems import workload_section
from knobtune.systems.rocksdb.db_bench_workload import ALLOWED_FLAGS, WorkloadFlags, knob_flags, read_section
from knobtune.workloads import load_workload

HEAD = """name = "{name}"
systems = ["rocksdb"]
objective = "ops_per_s"
records = {records}
ladder = [0.5, 1.0]
key_size = 16
value_size = 100

[drivers.db_bench]
"""


def _workload_file(tmp_path: Path, section: str, records: int = 4000, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(HEAD.format(name=name, records=records) + section)
    return path


def _run(rocksdb, path: Path, tmp_path: Path, rung: int = -1):
    """One run of the workload file at ``rung`` under the default config: its argv, its measurement, its output."""
    workload = load_workload(path)
    log = tmp_path / f"{path.stem}-{rung}.log"
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        argv = target.argv(rocksdb.defaults(), workload.rungs[rung], tmp_path / "db", 7)
        measurement = target.run(rocksdb.defaults(), workload.rungs[rung], timeout_s=120, log_path=log, seed=7)
    return argv, measurement, log.read_text(), workload.rungs[rung]


# ------------------------------------------------------------------ threads


def test_two_threads_do_the_rungs_work_between_them(rocksdb, tmp_path: Path) -> None:
    """db_bench runs readrandom and deleterandom on every thread, each doing --reads / --deletes operations (default
    --num): knobtune gives each thread half, so the phases do the rung's records; filluniquerandom runs on one thread
    whatever --threads says and writes every key once (--writes stays at --num)."""
    path = _workload_file(tmp_path, 'benchmarks = ["filluniquerandom", "readrandom", "deleterandom"]\n'
                                    'verify = ["readrandom"]\nthreads = 2\n')
    for rung in (0, 1):
        argv, measurement, output, asked = _run(rocksdb, path, tmp_path, rung)
        assert "--threads=2" in argv and f"--reads={asked.records // 2}" in argv
        assert not any(arg.startswith("--writes=") for arg in argv)
        assert {p.name: p.ops for p in measurement.phases} == {
            "filluniquerandom": asked.records, "readrandom": asked.records, "deleterandom": asked.records}
        read = next(p for p in measurement.phases if p.name == "readrandom")
        assert read.found == read.expected == asked.records // 2  # db_bench prints one thread's count: all found
        assert "multithreaded not supported" in output  # db_bench's own word for filluniquerandom


def test_two_threads_share_the_writes_when_no_fill_runs_on_one_thread(rocksdb, tmp_path: Path) -> None:
    path = _workload_file(tmp_path, 'benchmarks = ["fillrandom", "overwrite", "readrandomwriterandom"]\nthreads = 2\n',
                          records=3000)
    argv, measurement, _, asked = _run(rocksdb, path, tmp_path)
    assert {"--threads=2", "--writes=1500", "--reads=1500"} <= set(argv)
    assert {p.name: p.ops for p in measurement.phases} == {
        "fillrandom": 3000, "overwrite": 3000, "readrandomwriterandom": 3000}


def test_a_rung_that_does_not_divide_gives_each_thread_its_share_rounded_up() -> None:
    assert WorkloadFlags(threads=3).argv(["readrandom"], 1000) == [
        "--threads=3", "--reads=334", "--deletes=334", "--writes=334"]
    assert WorkloadFlags(threads=3).argv(["filluniquerandom", "readrandom"], 1000) == [
        "--threads=3", "--reads=334", "--deletes=334"]  # --writes would shrink the one-thread fill
    assert WorkloadFlags().argv(["readrandom"], 1000) == ["--threads=1"]  # one thread: db_bench's counts, as ever


# ------------------------------------------------------------------ flags


def test_an_allowed_flag_reaches_db_bench_and_changes_its_mix(rocksdb, tmp_path: Path) -> None:
    section = 'benchmarks = ["filluniquerandom", "readrandomwriterandom"]\nmeasure = ["readrandomwriterandom"]\n'
    plain = _workload_file(tmp_path, section, records=2000, name="plain")
    halves = _workload_file(tmp_path, section + "flags = { readwritepercent = 50 }\n", records=2000, name="halves")
    _, _, default_output, _ = _run(rocksdb, plain, tmp_path)
    argv, measurement, output, _ = _run(rocksdb, halves, tmp_path)
    assert "--readwritepercent=50" in argv  # one argv element: never through a shell
    assert "( reads:1800 writes:200 total:2000" in default_output  # db_bench's default: 90% reads
    assert "( reads:1000 writes:1000 total:2000" in output
    assert measurement.value(load_workload(halves).objective) > 0


def test_flag_values_are_typed_and_spelled_as_db_bench_reads_them(tmp_path: Path) -> None:
    path = _workload_file(tmp_path, 'benchmarks = ["filluniquerandom", "seekrandom"]\n'
                                    'flags = { seek_nexts = 10, reverse_iterator = true, compression_ratio = 0.25, '
                                    'read_random_exp_range = 2 }\n')
    workload = load_workload(path)
    flags = read_section(workload, workload.driver("db_bench"), knob_flags("rocksdb")).flags
    assert flags == ("--seek_nexts=10", "--reverse_iterator=true", "--compression_ratio=0.25",
                           "--read_random_exp_range=2")


# ------------------------------------------------------------------ refused, in one line


REFUSED = [
    ('benchmarks = ["fillrandom"]\nflags = { write_buffer_size = 1048576 }\n', "flags.write_buffer_size",
     "'write_buffer_size' is a tuning knob, which the search sets", "remove it from the workload"),
    ('benchmarks = ["fillrandom"]\nflags = { compression_type = "none" }\n', "flags.compression_type",
     "is a tuning knob", "remove it"),
    ('benchmarks = ["fillrandom"]\nflags = { readwritepercnt = 50 }\n', "flags.readwritepercnt",
     "unknown field 'flags.readwritepercnt' (did you mean 'readwritepercent'?)",
     "remove it, or use one of " + ", ".join(ALLOWED_FLAGS)),
    ('benchmarks = ["fillrandom"]\nflags = { duration = 30 }\n', "flags.duration",
     "a fixed duration makes every run take the same time", "size the run with `records`"),
    ('benchmarks = ["fillrandom"]\nflags = { reads = 100 }\n', "flags.reads",
     "the fidelity ladder sets it for each rung", "set `records`"),
    ('benchmarks = ["fillrandom"]\nflags = { threads = 4 }\n', "flags.threads", "knobtune sets --threads itself",
     "write `threads = N`"),
    ('benchmarks = ["readrandomwriterandom"]\nflags = { readwritepercent = 150 }\n', "flags.readwritepercent",
     "flags.readwritepercent 150 is above 100", "e.g. readwritepercent = 50"),
    ('benchmarks = ["readrandomwriterandom"]\nflags = { readwritepercent = "50" }\n', "flags.readwritepercent",
     "'50' is not a whole number", "e.g. readwritepercent = 50"),
    ('benchmarks = ["randomwithverify"]\nflags = { deletepercent = 20 }\n', "flags.deletepercent",
     "20 leaves randomwithverify no writes", "a deletepercent under 10"),
    ('benchmarks = ["fillrandom"]\nflags = "readwritepercent=50"\n', "flags", "flags is not a table",
     "write it as a table of its fields (readwritepercent, deletepercent,"),
    ('benchmarks = ["fillrandom"]\nthread = 2\n', "thread",
     "unknown field 'thread' (did you mean 'threads'?)", "remove it, or use one of benchmarks, measure, verify, twin, "
     "threads, flags"),
    ('benchmarks = ["fillrandom"]\nthreads = 0\n', "threads", "threads 0 is below 1", "e.g. threads = 4"),
    ('benchmarks = ["fillseq", "readrandom"]\nthreads = 2\n', "threads",
     "threads = 2 with fillseq: every db_bench thread walks the keys from the first one", "threads = 1"),
    ('benchmarks = ["filluniquerandom", "fillrandom"]\nthreads = 2\n', "threads",
     "db_bench runs filluniquerandom on one thread and fillrandom on every thread", "fill with fillrandom"),
    ('benchmarks = ["fillrandom", "randomwithverify"]\nthreads = 2\n', "threads",
     "with randomwithverify: how db_bench counts its operations per thread was not checked", "threads = 1"),
    ('benchmarks = ["fillrandom"]\ntwin = ["fillseq", "readseq"]\nthreads = 2\n', "threads", "with fillseq, readseq",
     "threads = 1"),
]


@pytest.mark.parametrize(("section", "field", "said", "fix"), REFUSED,
                         ids=[f"{case[1]}-{case[2][:24]}" for case in REFUSED])
def test_a_bad_section_is_refused_in_one_line_naming_the_file_the_field_and_the_fix(
        tmp_path: Path, section: str, field: str, said: str, fix: str) -> None:
    path = _workload_file(tmp_path, section)
    with pytest.raises(WorkloadError) as caught:
        workload_section("rocksdb", "db_bench", load_workload(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: [drivers.db_bench]: ") and field in message, message
    assert said in message and f"Fix: {fix}" in message, message
    assert "\n" not in message


def test_the_command_line_refuses_a_knob_flag_before_running_anything(tmp_path: Path) -> None:
    path = _workload_file(tmp_path, 'benchmarks = ["fillrandom"]\nflags = { write_buffer_size = 1048576 }\n')
    home = tmp_path / "studies"
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", str(path),
                             "--trials", "1", "--dir", str(home)], capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(rf"error: {re.escape(str(path))}: \[drivers\.db_bench\]: flags\."
                                        r"write_buffer_size: .*tuning knob.*Fix: ", lines[0]), result.stderr
    assert not (home / "studies.db").exists() and "study" not in result.stdout  # refused before anything ran
