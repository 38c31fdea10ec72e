"""The set-up in parts: scripts/demo installs the rocksdb part only, scripts/test every part, and every message about a
missing tool names a part scripts/setup has. Static checks: `scripts/setup --dry-run` prints its plan and installs
nothing."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from knobtune.drivers.embedded import native_fix
from knobtune.errors import ToolMissingError
from knobtune.installing import NATIVE_PARTS, setup_command
from knobtune.knobs import load_catalog
from knobtune.systems import SYSTEMS, target_class
from knobtune.systems.postgresql import sysbench
from knobtune.systems.cassandra.node import FETCH_HINT
from knobtune.systems.postgresql.server import INSTALL_HINT, PG_BIN
from knobtune.systems.rocksdb.build import BUILD_HINT
from knobtune.workloads import load_workload

ROOT = Path(__file__).parent.parent
SETUP = ROOT / "scripts" / "setup"
PARTS = ("rocksdb", "leveldb", "postgresql", "mariadb", "cassandra", "tests")  # scripts/setup's, in its order
# What only the other systems and the tests need: none of it is the demo's.
NOT_THE_DEMOS = {"postgresql-15", "libpq-dev", "mariadb-server", "sysbench", "openjdk-17-jdk-headless", "maven",
                 "chromium", "libgtest-dev", "rocksdb-tools", "iproute2", "nftables"}
# RocksDB's release build (scripts/rocksdb-release) and kvbench (native/CMakeLists.txt) need these.
THE_DEMOS = {"librocksdb-dev", "libgflags-dev", "libsnappy-dev", "liblz4-dev", "libzstd-dev", "zlib1g-dev",
             "libbz2-dev", "dpkg-dev", "cmake", "g++", "make", "libleveldb-dev", "nlohmann-json3-dev"}


def plan(*parts: str) -> dict[str, list[str]]:
    """What ``scripts/setup --dry-run PARTS`` says it would do: its parts, apt packages and steps."""
    out = subprocess.run(["bash", str(SETUP), "--dry-run", *parts], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    said: dict[str, list[str]] = {"parts": [], "apt": [], "step": []}
    for line in out.splitlines():
        key, _, value = line.partition(": ")
        if key == "step":
            said["step"].append(value)
        else:
            said[key] = value.split()
    return said


def setup_calls(script: str) -> list[str]:
    """The lines of ``scripts/SCRIPT`` that run the set-up (comments left out)."""
    lines = (ROOT / "scripts" / script).read_text().splitlines()
    return [line.strip() for line in lines if "scripts/setup" in line and not line.lstrip().startswith("#")]


def test_the_demo_installs_the_rocksdb_part_only() -> None:
    assert setup_calls("demo") == ["bash scripts/setup rocksdb"]
    demo = plan("rocksdb")
    assert demo["parts"] == ["rocksdb"]
    assert NOT_THE_DEMOS & set(demo["apt"]) == set()
    assert THE_DEMOS <= set(demo["apt"])
    assert demo["step"] == ["apt", ".venv", "scripts/rocksdb-release", "native/build: kvbench"]


def test_the_tests_install_every_part() -> None:
    assert setup_calls("test") == ["bash scripts/setup"]
    everything = plan()
    assert plan("all") == everything
    assert everything["parts"] == list(PARTS)
    assert NOT_THE_DEMOS | THE_DEMOS <= set(everything["apt"])
    assert everything["step"] == ["apt", ".venv with the test tools", "scripts/rocksdb-release",
                                  "scripts/leveldb-tunable", "native/build: all", "scripts/cassandra-fetch"]


# What each part adds to the rocksdb part (the core): apt packages, and its steps after the release build.
EXTRAS = {"leveldb": ({"patch"}, ["scripts/leveldb-tunable", "native/build: kvbench kvbench-leveldb-tunable"]),
          "postgresql": ({"postgresql-15", "sysbench", "libpq-dev"}, ["native/build: kvbench pgreplay-kt"]),
          "mariadb": ({"mariadb-server", "sysbench"}, ["native/build: kvbench"]),
          "cassandra": ({"openjdk-17-jdk-headless", "maven"}, ["native/build: kvbench", "scripts/cassandra-fetch"]),
          "tests": ({"rocksdb-tools", "libgtest-dev", "chromium", "procps", "iproute2", "nftables"},
                    ["native/build: all"])}


@pytest.mark.parametrize("part", list(EXTRAS))
def test_every_part_installs_the_core_and_its_own_extras(part: str) -> None:
    alone, core = plan(part), plan("rocksdb")
    assert alone["parts"] == ["rocksdb", part]
    packages, steps = EXTRAS[part]
    assert set(alone["apt"]) - set(core["apt"]) == packages
    assert alone["step"][3:] == steps
    assert alone["step"][:3] == ["apt", ".venv with the test tools" if part == "tests" else ".venv",
                                 "scripts/rocksdb-release"]


def test_every_part_knobtune_names_is_one_the_set_up_has() -> None:
    usage = subprocess.run(["bash", str(SETUP), "--help"], capture_output=True, text=True, timeout=30).stderr
    said = re.search(r"parts: ([a-z ]+) \(none, or all: all of them\)", usage)
    assert said is not None and tuple(said.group(1).split()) == PARTS
    assert set(PARTS) == {*SYSTEMS, "tests"}  # every shipped system has a part of its name
    cmake = (ROOT / "native" / "CMakeLists.txt").read_text()
    for program, part in NATIVE_PARTS.items():
        assert f"add_executable({program} " in cmake
        native = [step.split()[1:] for step in plan(part)["step"] if step.startswith("native/build: ")]
        assert native in ([["all"]], [["kvbench", program]], [[program]]), (program, part, native)
    mariadb = tomllib.loads((ROOT / "knobtune" / "systems" / "mariadb" / "system.toml").read_text())
    for hint, part in ((BUILD_HINT, "rocksdb"), (FETCH_HINT, "cassandra"), (INSTALL_HINT, "postgresql"),
                       (native_fix("kvbench-leveldb-tunable"), "leveldb"), (native_fix("pgreplay-kt"), "postgresql"),
                       (native_fix("kvbench"), "rocksdb"), (mariadb["install"], "mariadb")):
        assert f"`{setup_command(part)}`" in hint, hint


def test_an_unknown_part_is_refused_in_one_line_naming_the_parts() -> None:
    result = subprocess.run(["bash", str(SETUP), "--dry-run", "postgres"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert "no part 'postgres'" in first and "Fix: name one of rocksdb leveldb postgresql" in first


@pytest.mark.skipif(not (PG_BIN / "postgres").exists(), reason="PostgreSQL 15 is not installed")
def test_postgresql_through_sysbench_without_sysbench_names_the_postgresql_part(tmp_path: Path, monkeypatch) -> None:
    """sysbench comes with the postgresql part; without it the check stops before any server starts."""
    monkeypatch.setattr(sysbench, "SYSBENCH", tmp_path / "sysbench")
    target = target_class("postgresql", "sysbench")(load_catalog("postgresql"), load_workload("oltp_read_write"),
                                                    tmp_path / "scratch")
    with pytest.raises(ToolMissingError, match=r"sysbench is not installed .* Fix: run `scripts/setup postgresql`"):
        target.preflight()
    assert not (tmp_path / "scratch").exists()


def test_knobtune_systems_says_which_part_installs_each_system() -> None:
    from knobtune.cli.catalog import _system_rows

    rows = _system_rows()
    assert {row["system"] for row in rows} <= set(PARTS)
    assert all(row["setup"] == f"scripts/setup {row['system']}" for row in rows)
