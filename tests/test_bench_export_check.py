"""bench/export_check.py end to end at a tiny size: a 2-trial study, its export, db_bench run beside the default.
Timings at this size mean nothing: the test checks the script runs and what its JSON holds, never a speedup."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knobtune.cli import app
from knobtune.systems.rocksdb.build import find_db_bench, rocksdb_build

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "export_check.py"


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A studies folder with a finished 2-trial RocksDB study, ``ec``."""
    home = tmp_path_factory.mktemp("export-check") / "studies"
    tuned = CliRunner().invoke(app, [
        "tune", "rocksdb", "--workload", "fillrandom", "--records", "2000", "--trials", "2", "--sampler", "random",
        "--seed", "3", "--knobs", "write_buffer_size,cache_size,bloom_bits", "--study", "ec", "--verify-top", "1",
        "--repeats", "2", "--dir", str(home), "--json"])
    assert tuned.exit_code == 0, tuned.output
    return home


@pytest.mark.slow
def test_export_check_measures_the_exported_file_beside_the_default(finished_study: Path, tmp_path: Path) -> None:
    home = finished_study
    out = tmp_path / "check.json"
    ran = subprocess.run([sys.executable, str(SCRIPT), "ec", "--dir", str(home), "--repeats", "2", "--limit-s", "120",
                          "--out", str(out)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    result = json.loads(out.read_text())

    assert result["failures"] == {} and all(len(times) == 2 for times in result["times_s"].values())
    assert result["workload"] == {"name": "fillrandom", "records": 2000, "settled": True}
    exported = result["argv"]["exported"]
    assert any(flag.startswith("--options_file=") and flag.endswith("OPTIONS.ini") for flag in exported)
    assert any(flag.startswith("--cache_size=") for flag in exported), "the cache as the export's header gives it"
    assert not any(flag.startswith("--options_file") for flag in result["argv"]["default"])
    benchmarks = [flag for flag in result["argv"]["default"] if flag.startswith("--benchmarks=")]
    assert benchmarks == [flag for flag in exported if flag.startswith("--benchmarks=")]
    assert benchmarks[0].endswith(",flush,waitforcompaction"), "a settled study's check pays the settle too"
    speedup = result["speedup"]
    assert speedup["ci_low"] <= speedup["ratio"] <= speedup["ci_high"] and speedup["n_baseline"] == 2
    assert len(result["commit"]) >= 40 and result["rocksdb_build"] == rocksdb_build().description
    assert result["db_bench"] == find_db_bench().replace(str(Path.home()) + "/", "~/")  # no machine's paths
    assert result["machine"]["cpus"] >= 1 and result["machine"]["system_version"] == result["rocksdb_build"]
    if result["claim"]:  # the study's verified claim beside it, and the share of it the check holds
        compared = result.get("speedup_without_sleep", speedup)
        assert result["of_claim"] == pytest.approx(compared["ratio"] / result["claim"]["ratio"])
        assert result["holds"] == (result["of_claim"] >= 0.9)


@pytest.mark.slow
def test_the_suite_runs_a_question_into_its_folder_with_its_provenance(finished_study: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/run.py's runner on a tiny export check: the result lands in its question's folder, named by the day and
    the commit, stamped by emit with the command, the commit, the machine, the quiet judgement and the builds.
    One run a side: each db_bench run ends in waitforcompaction's 5 s sleep, and the figure is the other test's."""
    sys.path.insert(0, str(SCRIPT.parent))
    import run  # bench/ holds scripts, not a package
    import suite

    monkeypatch.setattr(suite, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(suite, "RESULTS_MD", tmp_path / "RESULTS.md")
    question = dataclasses.replace(suite.read_question(suite.QUESTIONS / "export-check.toml"), name="tiny-check",
                                   run=("export_check.py", "ec", "--repeats", "1", "--limit-s", "120"))
    assert run.run_question(question, finished_study) == 0

    [path] = (tmp_path / "results" / "tiny-check").glob("*.json")
    commit = subprocess.run(["git", "-C", str(SCRIPT.parent), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    assert path.name == f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%d}-{commit}.json"
    result = json.loads(path.read_text())
    assert result["study"] == "ec" and result["failures"] == {}, "the script's own result, whole"
    stamp = result["provenance"]
    assert stamp["recorded"] is True and stamp["question"] == "tiny-check" and stamp["commit"] == commit
    assert stamp["command"] == ".venv/bin/python bench/run.py tiny-check --dir DIR"
    assert stamp["machine"]["cpus"] == os.cpu_count() and stamp["machine"]["kernel"] == platform.release()
    assert {"system": "rocksdb", "driver": "db_bench", "build": rocksdb_build().description} in stamp["systems"]
    builds = {(row["system"], row["driver"]): row["build"] for row in stamp["systems"]}
    assert all(builds.values()), f"every installed system says its build (servers their version): {builds}"
    quiet = stamp["quiet"]
    assert quiet["quiet"] in (True, False) and 0 <= quiet["others_cpu_share"] <= 1 and len(quiet["load_before"]) == 3
    assert (tmp_path / "RESULTS.md").read_text().startswith("# Benchmark results")
