"""Scan lengths beside a RocksDB trace (native/scanlog/scan_log.h): recorded by a real application (scanlog-demo,
built by native/CMakeLists.txt) and by the kit's capture, captured, and replayed on real RocksDB, each traced seek
followed by the Next and Prev calls the application made; a bad scan-length file refused in one line."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from knobtune.drivers.embedded import find_kvbench
from knobtune.systems import make_target
from knobtune.systems.rocksdb.capture import from_workload
from knobtune.workloads import load_workload

# What scanlog-demo does after it starts its trace (native/scanlog/scan_log_demo.cc), as (cf, kind, next, prev,
# ran to the end) in the order its main thread seeks; its second thread pages "mail" (cf 1) backwards meanwhile.
MAIN = ([(0, "seek", n, 0, False) for n in (0, 1, 20, 500)]
        + [(0, "seek_for_prev", 0, p, False) for p in (0, 1, 20, 500)]
        + [(0, "seek", 10, 0, True),  # asked for 50 from msg-000990: the keys end after 10
           (0, "seek", 5, 0, True),  # asked for 20 from msg-000200 below the upper bound msg-000205
           (0, "seek_for_prev", 0, 6, True),  # asked for 20 back from msg-000005: the first key is 6 back
           (0, "seek", 3, 0, False), (0, "seek", 7, 0, False)])  # the same seek twice, two lengths
MAIL = [(1, "seek_for_prev", 0, p, False) for p in (0, 1, 20, 500)]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """scanlog-demo's store, checkpoint, trace and scan lengths, and the steps it says it took."""
    folder = tmp_path_factory.mktemp("app")
    paths = {name: folder / name for name in ("db", "checkpoint", "app.trace", "app.scans")}
    done = subprocess.run([find_kvbench("scanlog-demo", "KNOBTUNE_SCANLOG_DEMO"), "--db", str(paths["db"]),
                           "--checkpoint", str(paths["checkpoint"]), "--trace", str(paths["app.trace"]),
                           "--scans", str(paths["app.scans"])], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {**paths, "steps": json.loads(done.stdout)}


@pytest.fixture(scope="module")
def capture(app: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("captures") / "app.capture"
    result = _cli("capture", "rocksdb", "--from", str(app["app.trace"]), "--scans", str(app["app.scans"]),
                  "--state", str(app["checkpoint"]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    (out.parent / "capture.out").write_text(result.stdout + result.stderr)
    return out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "knobtune.cli", *args], capture_output=True, text=True, timeout=600)


def _lines(scans: Path) -> list[list[str]]:
    return [line.split("\t") for line in scans.read_text().splitlines()[1:]]


def test_the_wrapper_writes_each_traced_scan_owner_only(app: dict[str, Any]) -> None:
    scans = app["app.scans"]
    assert scans.read_text().splitlines()[0] == "knobtune-scans 1"
    assert stat.S_IMODE(scans.stat().st_mode) == 0o600
    written = sorted((int(f[0]), f[1], int(f[3]), int(f[4]), f[5] == "end") for f in _lines(scans))
    assert written == sorted(MAIN + MAIL)  # the SeekToFirst scan is not traced, so not written
    assert app["steps"] == {"next": sum(s[2] for s in MAIN), "prev": sum(s[3] for s in MAIN + MAIL)}


def test_the_capture_keeps_the_scans_private_and_counts_them_without_keys(capture: Path, app: dict[str, Any]) -> None:
    assert stat.S_IMODE((capture / "scans").stat().st_mode) == 0o600
    assert (capture / "scans").read_bytes() == app["app.scans"].read_bytes()
    workload = load_workload(capture)
    assert workload.driver("replay")["scans"] == "scans"
    assert workload.capture is not None and len(workload.capture.files["scans"]) == 64
    assert workload.capture.scans == {"scans": 17, "matched": 17, "next": 546, "prev": 1048, "at_end": 3}
    shown = (capture.parent / "capture.out").read_text()
    assert "scans: 17 recorded, 17 matched to a traced seek; 546 Next and 1,048 Prev steps" in shown, shown
    assert "msg-" not in shown and "6d73672d" not in shown  # no key, as text or as hex
    assert "no scan lengths were recorded" not in "\n".join(workload.capture.notes)


@pytest.mark.parametrize("threads", [1, 4])
def test_the_replay_steps_each_seek_as_far_as_the_application_did(capture: Path, tmp_path: Path,
                                                                  threads: int) -> None:
    spec, report = tmp_path / "replay.json", tmp_path / "report.txt"
    db = tmp_path / "db"
    subprocess.run(["cp", "-r", str(capture / "checkpoint"), str(db)], check=True)
    spec.write_text(json.dumps({"trace": str(capture / "trace"), "scans": str(capture / "scans"),
                                "scan_report": str(report), "threads": threads}))
    done = subprocess.run([find_kvbench(), "--engine", "rocksdb", "--db", str(db), "--replay", str(spec)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replayed = [line.split() for line in report.read_text().splitlines()]
    by_cf = {cf: [(int(r[1]), r[2], int(r[6]), int(r[7])) for r in replayed if r[1] == str(cf)] for cf in (0, 1)}
    assert by_cf[0] == [(cf, kind, n, p) for cf, kind, n, p, _ in MAIN]  # recorded lengths, in the order they ran
    assert by_cf[1] == [(cf, kind, n, p) for cf, kind, n, p, _ in MAIL]
    assert all(r[5] == "1" for r in replayed)
    scans = json.loads(done.stdout)["replay"]["scans"]
    assert (scans["next_replayed"], scans["prev_replayed"], scans["cut_short"]) == (546, 1048, 0)


def _replayed_seeks(capture: Path, folder: Path, **spec: object) -> dict[int, list[str]]:
    """kvbench's replay of the capture onto a copy of its checkpoint: its scan report, by seek number."""
    folder.mkdir()
    path, report, db = folder / "replay.json", folder / "report.txt", folder / "db"
    subprocess.run(["cp", "-r", str(capture / "checkpoint"), str(db)], check=True)
    path.write_text(json.dumps({"trace": str(capture / "trace"), "scans": str(capture / "scans"),
                                "scan_report": str(report), **spec}))
    done = subprocess.run([find_kvbench(), "--engine", "rocksdb", "--db", str(db), "--replay", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {int(line.split()[0]): line.split()[1:] for line in report.read_text().splitlines()}


def test_a_replay_of_windows_runs_their_seeks_alone_each_as_far_as_the_application_did(
        capture: Path, tmp_path: Path) -> None:
    records = load_workload(capture).records
    whole = _replayed_seeks(capture, tmp_path / "whole")
    windows = [[0, records // 3], [2 * records // 3, records]]
    kept = _replayed_seeks(capture, tmp_path / "windows", windows=windows)
    assert 0 < len(kept) < len(whole)
    assert all(kept[seek] == whole[seek] for seek in kept)  # a seek after a gap still gets its own recorded steps
    assert 0 in kept and max(whole) in kept  # the first window's and the last's
    with pytest.raises(AssertionError, match="windows"):
        _replayed_seeks(capture, tmp_path / "bad", windows=[[5, 3]])


def test_a_scan_stops_where_the_replayed_iterator_becomes_invalid(capture: Path, tmp_path: Path) -> None:
    # The scan that ran out after 10 Next calls from msg-000990, recorded as 50: the replay's runs out after 10 too.
    scans = tmp_path / "longer.scans"
    text = (capture / "scans").read_text()
    k0990 = b"msg-000990".hex()
    assert text.count(f"\t10\t0\tend\t{k0990}\n") == 1
    scans.write_text(text.replace(f"\t10\t0\tend\t{k0990}\n", f"\t50\t0\tend\t{k0990}\n"))
    db, spec = tmp_path / "db", tmp_path / "replay.json"
    subprocess.run(["cp", "-r", str(capture / "checkpoint"), str(db)], check=True)
    spec.write_text(json.dumps({"trace": str(capture / "trace"), "scans": str(scans)}))
    done = subprocess.run([find_kvbench(), "--engine", "rocksdb", "--db", str(db), "--replay", str(spec)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replayed = json.loads(done.stdout)["replay"]["scans"]
    assert (replayed["next"], replayed["next_replayed"], replayed["cut_short"]) == (546 + 40, 546, 1)


def test_the_target_counts_the_replayed_steps(rocksdb, capture: Path, tmp_path: Path) -> None:
    workload = load_workload(capture)
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        run = target.run(rocksdb.defaults(), workload.full, timeout_s=None, log_path=tmp_path / "run.log", seed=1)
    assert run.verified
    assert run.counters["replay_scan_steps"] == 546 + 1048
    assert run.counters["replay_scans_matched"] == 17 and run.counters["replay_scans_cut_short"] == 0


def test_a_kit_capture_records_its_scans_both_ways_and_replays_them(rocksdb, tmp_path: Path) -> None:
    workload_file = tmp_path / "pages.toml"
    workload_file.write_text(PAGES)
    out = tmp_path / "pages.capture"
    summary = from_workload(load_workload(workload_file), out, "pages", None)
    assert summary.scans["scans"] == summary.mix["seek"] + summary.mix["seek_for_prev"] == summary.scans["matched"]
    assert summary.scans["next"] > 0 and summary.scans["prev"] > 0
    workload = load_workload(out)
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        run = target.run(rocksdb.defaults(), workload.full, timeout_s=None, log_path=tmp_path / "run.log", seed=1)
    assert run.counters["replay_scan_steps"] == summary.scans["next"] + summary.scans["prev"]
    assert run.counters["replay_scans_cut_short"] == 0


def test_without_scan_lengths_the_replay_is_seeks_alone_and_says_so(app: dict[str, Any], rocksdb,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "seeks.capture"
    result = _cli("capture", "rocksdb", "--from", str(app["app.trace"]), "--state", str(app["checkpoint"]),
                  "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "no scan lengths were recorded" in result.stdout
    workload = load_workload(out)
    assert "scans" not in workload.driver("replay") and not (out / "scans").exists()
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        run = target.run(rocksdb.defaults(), workload.full, timeout_s=None, log_path=tmp_path / "run.log", seed=1)
    assert "replay_scan_steps" not in run.counters and run.phases[0].ops == workload.records


@pytest.mark.parametrize("damage", ["no-header", "other-version", "six-fields", "cut-short", "not-hex",
                                    "another-trace"])
def test_a_bad_scan_file_gives_one_line_and_writes_nothing(app: dict[str, Any], tmp_path: Path, damage: str) -> None:
    good = app["app.scans"].read_text()
    header, first, *rest = good.splitlines(keepends=True)
    bad = tmp_path / "bad.scans"
    text = {"no-header": "".join([first, *rest]),
            "other-version": "knobtune-scans 2\n" + first,
            "six-fields": header + first.rsplit("\t", 1)[0] + "\n",
            "cut-short": good.rstrip("\n"),
            "not-hex": header + first.rsplit("\t", 1)[0] + "\tmsg-000100\n",
            "another-trace": header + "0\tseek\t1\t3\t0\tmore\t6e6f\n"}[damage]
    bad.write_text(text)
    out = tmp_path / "out.capture"
    result = _cli("capture", "rocksdb", "--from", str(app["app.trace"]), "--scans", str(bad), "--state",
                  str(app["checkpoint"]), "-o", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix:" in lines[0], result.stderr
    expected = {"no-header": "is not a scan-length file", "other-version": "of another version",
                "six-fields": "6 tab-separated fields, not 7", "cut-short": "cut short",
                "not-hex": "not hex digits", "another-trace": "matches a seek of the trace"}[damage]
    assert expected in lines[0], lines[0]
    assert "6d73672d" not in lines[0] and "msg-" not in lines[0]  # a key is never printed
    assert not out.exists(), "a refused capture left its folder"


PAGES = """
name = "pages"
description = "pages both ways: a test's small kit workload"
systems = ["rocksdb"]
objective = "elapsed_s"
ladder = [0.1, 1.0]
records = 2000
operations = 2000
key_size = 16
value_size = 100

[drivers.kvbench]
phases = [
  { name = "load", kind = "fill", order = "shuffled" },
  { name = "run", kind = "mix", mix = { read = 0.3, update = 0.2, scan = 0.25, scan_reverse = 0.25 }, \
distribution = "uniform", scan_length_min = 1, scan_length_max = 30, expect = "all" },
]
measure = ["run"]
"""


@pytest.mark.parametrize("args, expected", [
    (["rocksdb", "--workload", "ycsb-a", "--scans", "{scans}"], "--scans goes with --from"),
    (["postgresql", "--from", "{scans}", "--scans", "{scans}"], "postgresql takes none"),
    (["rocksdb", "--from", "{trace}", "--scans", "{missing}"], "--scans {missing} does not exist"),
])
def test_scans_given_where_they_do_not_belong_are_refused_in_one_line(app: dict[str, Any], tmp_path: Path,
                                                                      args: list[str], expected: str) -> None:
    paths = {"scans": str(app["app.scans"]), "trace": str(app["app.trace"]), "missing": str(tmp_path / "none")}
    out = tmp_path / "out.capture"
    result = _cli("capture", *[a.format(**paths) for a in args], "-o", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Fix:" in lines[0] and expected.format(**paths) in lines[0], result.stderr
    assert not out.exists()
