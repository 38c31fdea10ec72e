"""``threads = N`` in a workload's kvbench section: every phase but readseq and flush on N threads against one real
store (RocksDB, LevelDB and the tunable LevelDB), the counts still exact; a bad value refused in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from knobtune.errors import WorkloadError
from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.systems import workload_section
from knobtune.workloads import Workload, load_workload

from conftest import tiny

DRIVERS = [("rocksdb", "kvbench"), ("leveldb", "kvbench"), ("leveldb", "kvbench-tunable")]

HEAD = """name = "mine"
systems = ["rocksdb", "leveldb"]
objective = "ops_per_s"
records = {records}
operations = {operations}
ladder = [1.0]
key_size = 16
value_size = 100

[drivers.kvbench]
"""

EXACT = """phases = [
  { name = "fill", kind = "fill", order = "shuffled" },
  { name = "read", kind = "read", order = "shuffled", expect = "all" },
  { name = "random", kind = "read", order = "random", count = 1001, expect = "all" },
  { name = "run", kind = "mix", mix = { read = 0.4, insert = 0.3, rmw = 0.3 }, distribution = "latest", expect = "all" },
  { name = "scan", kind = "readseq", expect = "all" },
  { name = "delete", kind = "delete", order = "shuffled" },
  { name = "gone", kind = "read", order = "shuffled", expect = "none" },
]
threads = 4
"""  # noqa: E501 (an inline table is one TOML line)


def _workload_file(tmp_path: Path, section: str, records: int = 3001, operations: int = 4001) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(HEAD.format(records=records, operations=operations) + section)
    return path


def _run(system: str, driver: str, workload: Workload, tmp_path: Path) -> tuple[object, dict]:
    """One run of ``workload`` at its full size under the default config: the measurement and kvbench's result."""
    catalog = load_catalog(system)
    with make_target(catalog, workload, tmp_path / "scratch", driver) as target:
        measurement = target.run(catalog.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "run.log",
                                 seed=3)
    return measurement, json.loads((tmp_path / "run.result.json").read_text())


@pytest.mark.parametrize(("system", "driver"), DRIVERS)
def test_four_threads_touch_every_key_exactly_as_one_does(system: str, driver: str, tmp_path: Path) -> None:
    """Shuffled phases share out their keys, random order its count, the mix its operations; the mix's inserts are
    unique and its reads find every key (kvbench's own unit tests check the pieces)."""
    measurement, result = _run(system, driver, load_workload(_workload_file(tmp_path, EXACT)), tmp_path)
    spec = json.loads((tmp_path / "run.spec.json").read_text())
    assert spec["threads"] == 4 and spec["record_count"] == 3001 and spec["phases"][3]["count"] == 4001  # totals
    phases = {p["name"]: p for p in result["phases"]}
    assert {name: p["threads"] for name, p in phases.items()} == {  # this build's kvbench: it says how many ran
        "fill": 4, "read": 4, "random": 4, "run": 4, "scan": 1, "delete": 4, "gone": 4}
    run = phases["run"]
    records = 3001 + run["inserted"]  # the store's keys after the mix: the deletes walk them all
    assert [phases[name]["ops"] for name in ("fill", "read", "random", "run", "delete", "gone")] == [
        3001, 3001, 1001, 4001, records, records]
    assert (phases["read"]["found"], phases["read"]["not_found"]) == (3001, 0)
    assert (phases["random"]["found"], phases["random"]["not_found"]) == (1001, 0)
    assert run["not_found"] == 0 and run["inserted"] == run["latency_us"]["insert"]["count"] > 0
    assert sum(h["count"] for h in run["latency_us"].values()) == 4001
    assert phases["scan"]["keys_seen"] == records  # every insert a key of its own
    assert (phases["gone"]["found"], phases["gone"]["not_found"]) == (0, records)
    assert measurement.verified and {p.name: p.found for p in measurement.phases}["read"] == 3001


@pytest.mark.parametrize(("system", "driver"), DRIVERS)
def test_the_shipped_readwrite_threads_runs_on_four_threads_and_reads_every_key(system: str, driver: str,
                                                                                tmp_path: Path) -> None:
    measurement, result = _run(system, driver, tiny("readwrite-threads", 2000), tmp_path)
    load, run = result["phases"]
    assert result["threads"] == load["threads"] == run["threads"] == 4
    assert (load["ops"], run["ops"]) == (2000, 2000)  # the rung's records, shared out
    counts = {op: h["count"] for op, h in run["latency_us"].items()}
    assert set(counts) == {"read", "update"} and sum(counts.values()) == 2000
    assert (run["found"], run["not_found"]) == (counts["read"], 0)
    assert measurement.measured == ("run",) and measurement.verified


# ------------------------------------------------------------------ refused, in one line


REFUSED = [  # (the section's line, what the one line says after the file and the section)
    ("threads = 0", "threads 0 is below 1. Fix: e.g. threads = 4"),
    ("threads = 1025", "threads 1025 is above 1024. Fix: e.g. threads = 4"),
    ("threads = true", "threads True is not a whole number. Fix: e.g. threads = 4"),
    ('threads = "4"', "threads '4' is not a whole number. Fix: e.g. threads = 4"),
    ("threads = 2.5", "threads 2.5 is not a whole number. Fix: e.g. threads = 4"),
    ("thread = 4", "unknown field 'thread' (did you mean 'threads'?). Fix: remove it, or use one of phases, twin, "
                   "measure, threads"),
]


@pytest.mark.parametrize(("line", "said"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_bad_threads_is_refused_in_one_line_naming_the_file_the_field_and_the_fix(
        tmp_path: Path, line: str, said: str) -> None:
    path = _workload_file(tmp_path, 'phases = [{ kind = "fill" }]\n' + line + "\n")
    for system, driver in DRIVERS:
        with pytest.raises(WorkloadError) as caught:
            workload_section(system, driver, load_workload(path))
        message = str(caught.value)
        assert message == f"{path}: [drivers.kvbench]: {said}", message


def test_the_command_line_refuses_a_bad_threads_before_running_anything(tmp_path: Path) -> None:
    path = _workload_file(tmp_path, 'phases = [{ kind = "fill" }]\nthreads = 0\n')
    home = tmp_path / "studies"
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", "tune", "leveldb", "--workload", str(path),
                             "--trials", "1", "--dir", str(home)], capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(rf"error: {re.escape(str(path))}: \[drivers\.kvbench\]: threads 0 is below 1\. "
                                        r"Fix: e\.g\. threads = 4$", lines[0]), result.stderr
    assert not (home / "studies.db").exists()
