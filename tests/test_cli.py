"""The command line, in-process: every command, its JSON, and the one-line errors users cause."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knobtune.cli import app

from conftest import CORPUS

runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _error(*args: str, env: dict[str, str] | None = None) -> str:
    """Run the real entry point (as users do) and return its stderr; it must exit 2 with one error line."""
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", *args], capture_output=True, text=True, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_every_command_has_help_with_an_example() -> None:
    for command in ("systems", "knobs", "tune", "rank", "explain", "show", "export", "compare", "baseline", "report"):
        assert "Example: knobtune " + command in _ok(command, "--help").replace("\n", " ")


def test_systems_lists_drivers_and_verifiability() -> None:
    data = json.loads(_ok("systems", "--json"))
    assert {"system": "rocksdb", "driver": "db_bench"}.items() <= data["systems"][0].items()
    workloads = {w["name"]: w for w in data["workloads"]}
    assert workloads["put-get-delete"]["verifiable"] == {"db_bench": True, "kvbench": True}
    assert workloads["fillrandom"]["verifiable"] == {"db_bench": False, "kvbench": False}
    assert workloads["fillrandom"]["verifiable_twin"]["db_bench"] == ["filluniquerandom", "flush", "readrandom"]
    assert workloads["ycsb-a"]["verifiable"] == {"kvbench": True, "pgbench": True, "ycsb": True}
    rows = {(row["system"], row["driver"]): row for row in data["systems"]}
    assert rows[("leveldb", "kvbench")]["installed"] and rows[("rocksdb", "replay")]["installed"]
    assert "release" in rows[("rocksdb", "db_bench")]["build"]
    assert "NOT verifiable" in _ok("systems")


def test_knobs_json_carries_safety_classes() -> None:
    data = json.loads(_ok("knobs", "rocksdb", "--json"))
    knobs = {k["name"]: k for k in data["knobs"]}
    assert len(knobs) >= 35
    assert knobs["disable_wal"]["safety"] == "durability"
    assert knobs["compaction_style"]["safety"] == "data-loss" and knobs["compaction_style"]["unsafe_values"] == ["fifo"]
    assert knobs["disable_auto_compactions"]["safety"] == "operational"
    table = _ok("knobs", "rocksdb")
    assert "durability" in table and "data-loss" in table


@pytest.mark.slow
def test_tune_show_export_compare(tmp_path: Path) -> None:
    home = str(tmp_path / "studies")
    summary = json.loads(_ok("tune", "rocksdb", "--workload", "put-get-delete", "--records", "4000", "--trials", "4",
                             "--study", "cli", "--dir", home, "--sampler", "random", "--verify-top", "1",
                             "--repeats", "2", "--json"))
    assert summary["study"] == "cli" and summary["default_value"] > 0
    assert sum(summary["counts"].values()) == 4
    assert summary["left_out"]["disable_wal"] == "durability"
    shown = json.loads(_ok("show", "cli", "--dir", home, "--json"))
    assert shown["counts"] == summary["counts"] and shown["verdict"] == summary["verdict"]
    shown_text = _ok("show", "cli", "--dir", home)
    assert "kept out of the search" in shown_text
    assert "settled runs" in shown_text and "default: workload" in shown_text and "recovery" in shown_text
    assert "time: search " in shown_text and shown["time_spent"]["verification_s"] > 0  # --trials: no budget to keep
    assert "kept back" not in shown_text

    exported = json.loads(_ok("export", "cli", "--dir", home, "--format", "json"))
    assert exported["system"] == "rocksdb" and "config" in exported
    options = tmp_path / "OPTIONS.ini"
    _ok("export", "cli", "--dir", home, "--format", "rocksdb-options", "-o", str(options))
    assert "[CFOptions \"default\"]" in options.read_text()
    assert "# default: workload" in options.read_text() and "peak memory" in options.read_text()
    flags = _ok("export", "cli", "--dir", home, "--format", "db_bench-flags", "--trial", "0")
    assert flags.strip() == ""  # the default changes nothing

    # two files whose paths share their first 60 characters (a log's name keeps a label's first 60)
    folder = tmp_path / "a-folder-whose-name-alone-is-longer-than-sixty-characters-so-paths-in-it-share-them"
    folder.mkdir()
    config, other = folder / "bigger-buffer.json", folder / "bigger-buffer-too.json"
    config.write_text(json.dumps({"write_buffer_size": "128MiB"}))
    other.write_text(json.dumps({"write_buffer_size": "96MiB"}))
    compared = json.loads(_ok("compare", "rocksdb", "--workload", "put-get-delete", "--records", "3000",
                              "--config", "default", "--config", str(config), "--config", "study:cli",
                              "--config", str(other), "--repeats", "2", "--dir", home, "--json"))
    labels = [c["label"] for c in compared["candidates"]]
    assert labels == ["default", str(config), "study:cli", str(other)]
    assert all(len(c["values"]) == 2 for c in compared["candidates"])
    runs = [p for p in Path(home, "compare").glob("*.log") if re.search(r"-\d+\.log$", p.name)]  # no settles, retries
    assert len(runs) == 4 * 2, f"each candidate's runs keep their own logs: {sorted(p.name for p in runs)}"
    assert compared["candidates"][1]["speedup"]["ratio"] > 0
    assert set(compared["candidates"][0]["latency_us"]) == {"filluniquerandom", "readrandom", "deleterandom"}
    assert compared["candidates"][0]["latency_us"]["readrandom"]["p99"] > 0
    assert compared["candidates"][0]["costs"]["recovery_s"] > 0 and compared["candidates"][0]["costs"]["peak_rss_bytes"]
    refused = json.loads(_ok("compare", "rocksdb", "--workload", "put-get-delete", "--records", "3000",
                             "--config", "default", "--config", str(config), "--repeats", "1", "--dir", home,
                             "--memory-limit", "100MiB", "--json"))
    assert "planned memory" in refused["candidates"][1]["failure"]  # 2 x 128 MiB of write buffers


def test_error_unknown_knob(tmp_path: Path) -> None:
    line = _error("tune", "rocksdb", "--workload", "put-get-delete", "--trials", "1", "--knobs", "write_bufer_size",
                  "--dir", str(tmp_path))
    assert "unknown knob 'write_bufer_size'" in line and "Did you mean write_buffer_size" in line


def test_error_value_out_of_range(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"block_size": "10GiB"}))
    line = _error("compare", "rocksdb", "--workload", "put-get-delete", "--config", "default", "--config", str(config),
                  "--dir", str(tmp_path))
    assert "knob 'block_size'" in line and "out of range" in line and "Fix:" in line


def test_error_broken_catalog_file() -> None:
    line = _error("knobs", str(CORPUS / "catalogs" / "bad-no-safety.toml"))
    assert "bad-no-safety.toml" in line and "knobs.disable_wal.safety is missing" in line and "Fix:" in line


def test_error_missing_db_bench(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    line = _error("tune", "rocksdb", "--workload", "put-get-delete", "--trials", "1", "--dir", str(tmp_path / "s"),
                  env=env)
    assert "no db_bench" in line and "Fix: run `scripts/setup rocksdb`" in line


def test_error_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = _error("tune", "rocksdb", "--workload", "put-get-delete", "--trials", "1", "--dir", str(blocker / "studies"))
    assert "cannot write to the studies folder" in line and "--dir" in line


@pytest.mark.slow
def test_error_no_budget_and_unknown_study(tmp_path: Path) -> None:
    assert "--trials N or --time" in _error("tune", "rocksdb", "--workload", "put-get-delete", "--dir", str(tmp_path))
    assert "no study 'nope'" in _error("show", "nope", "--dir", str(tmp_path))
    assert "is not a duration" in _error("tune", "rocksdb", "--workload", "put-get-delete", "--time", "soon",
                                         "--dir", str(tmp_path))


def test_error_bad_workload_file(tmp_path: Path) -> None:
    line = _error("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-ladder.toml"), "--trials", "1",
                  "--dir", str(tmp_path))
    assert "ladder [0.5, 0.1, 1.0] is not an increasing list" in line and "Fix:" in line


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["qmc", "cmaes"])
def test_other_samplers_run(tmp_path: Path, sampler: str) -> None:
    summary = json.loads(_ok("tune", "rocksdb", "--workload", "put-get-delete", "--records", "2000", "--trials", "3",
                             "--dir", str(tmp_path), "--sampler", sampler, "--verify-top", "0", "--json"))
    assert sum(summary["counts"].values()) == 3


def test_error_bad_limits(tmp_path: Path) -> None:
    base = ("tune", "rocksdb", "--workload", "put-get-delete", "--trials", "1", "--dir", str(tmp_path))
    assert "--memory-limit 'lots' is not a size" in _error(*base, "--memory-limit", "lots")
    assert "--max-recovery-time '0s' is not a positive duration" in _error(*base, "--max-recovery-time", "0s")
    assert "--memory-limit is too low for the default config" in _error(*base, "--memory-limit", "10MiB")


@pytest.mark.parametrize("option, value, message", [
    ("--objective", "nosuch", "--objective 'nosuch' is not an objective"),
    ("--reduction-factor", "1", "--reduction-factor 1 is below 2"),
    ("--trials", "0", "--trials 0 is below 1"),
    ("--trials", "-3", "--trials -3 is below 1"),
    ("--records", "-5", "--records -5 is below 1"),
    ("--repeats", "-1", "--repeats -1 is below 2"),
    ("--timeout-factor", "0", "--timeout-factor 0 is below 1"),
    ("--time", "0s", "--time '0s' is not a positive duration"),
    ("--timeout-factor", "1e309", "--timeout-factor inf is not a finite number"),
    ("--timeout-factor", "nan", "--timeout-factor nan is not a finite number"),
    ("--seed", "abc", "Invalid value for '--seed'"),  # click's own usage errors are one line too
    ("--nosuch", "1", "No such option: --nosuch"),
    ("--records", "99999999999999", "not enough free space"),  # the data set against the scratch disk, up front
])
def test_error_bad_numbers_are_one_line(option: str, value: str, message: str, tmp_path: Path) -> None:
    args = ["tune", "rocksdb", "--workload", "put-get-delete", "--dir", str(tmp_path), option, value]
    if option != "--trials":
        args += ["--trials", "1"]
    assert message in _error(*args)


@pytest.mark.parametrize(("args", "message"), [
    (("tune", "nosuchdb", "--workload", "fillrandom"), "no knob catalog for system 'nosuchdb'"),
    (("tune", "rocksdb", "--workload", "nosuch"), "unknown workload 'nosuch'"),
    (("tune", "rocksdb", "--workload", "fillrandom", "--knobs", "nosuch_knob"), "unknown knob 'nosuch_knob'"),
    (("tune", "rocksdb", "--workload", "fillrandom", "--sampler", "nosuch"), "--sampler 'nosuch' is not a sampler"),
    (("tune", "rocksdb", "--workload", "fillrandom", "--top-k", "3"), "--ranking and --top-k go together"),
    (("tune", "postgresql", "--workload", "fillrandom"), "is for rocksdb, leveldb, not postgresql"),
    (("tune", "rocksdb", "--workload", "fillrandom", "--storage", "bogus://x"), "cannot open storage 'bogus://x'"),
])
def test_what_was_named_is_checked_before_the_missing_budget(tmp_path: Path, args: tuple[str, ...],
                                                              message: str) -> None:
    assert message in _error(*args, "--dir", str(tmp_path))  # no --trials, no --time: that error comes after


def test_error_unopenable_storage_is_one_line(tmp_path: Path) -> None:
    line = _error("tune", "rocksdb", "--workload", "put-get-delete", "--trials", "1", "--dir", str(tmp_path),
                  "--storage", "sqlite:////proc/nope/s.db")
    assert "cannot open storage" in line and "sqlalche.me" not in line


def test_a_command_reclaims_what_killed_processes_left_and_says_how_much(tmp_path: Path) -> None:
    """A scratch folder and a server home of a pid that cannot be alive (pid_max itself) are removed by the next
    command that could run something, which says how much it freed; a live process's folder stays."""
    import os
    import socket
    import tempfile

    dead = Path("/proc/sys/kernel/pid_max").read_text().strip()
    scratch = tmp_path / "scratch" / f"{socket.gethostname()}-{dead}"
    scratch.mkdir(parents=True)
    (scratch / "db").write_bytes(b"x" * 300_000)
    private_tmp = tmp_path / "tmp"  # a temporary folder of its own: other knobtune processes reclaim /tmp too
    private_tmp.mkdir()
    home = Path(tempfile.mkdtemp(prefix=f"knobtune-pg-{dead}-", dir=private_tmp))
    (home / "data").write_bytes(b"y" * 200_000)
    alive = tmp_path / "scratch" / f"{socket.gethostname()}-{os.getpid()}"
    alive.mkdir()
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", "fillrandom",
                             "--records", "500", "--trials", "1", "--verify-top", "0", "--dir", str(tmp_path)],
                            capture_output=True, text=True, env={**os.environ, "TMPDIR": str(private_tmp)})
    assert "reclaimed 488.3 KiB left by knobtune processes that were killed" in result.stdout
    assert not scratch.exists() and not home.exists() and alive.exists()
    assert result.returncode == 0, result.stderr  # after every input was checked: a bad one reclaims nothing


def test_the_command_line_loads_without_scikit_learn_or_scipy_stats() -> None:
    """Every `knobtune` command (and every test that runs one) pays for what the command line imports: scikit-learn
    and scipy.stats took about 1.2 s of its 1.9 s here, and only the rankings and a comparison's
    statistics use them, so they load there."""
    code = "import sys, knobtune.cli; print(sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
