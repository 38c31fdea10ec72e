"""PGTune, the RocksDB guide and the configs published for db_bench as baselines: PGTune's rules for known machines,
fitted to the catalog, the fixed configs, and `knobtune baseline`.

Expected values are worked out by hand from PGTune's source
(le0pard/pgtune src/features/configuration/configurationSlice.js at the commit
pgtune.toml names): sizes in kB, every division floored, then x 1024 for bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knobtune.cli import app
from knobtune.errors import CatalogError, UsageError
from knobtune.knobs import load_catalog
from knobtune.report.config_file import load_config_file
from knobtune.targets import DISKS, Machine, fixed_config, rotational_disks
from knobtune.systems import heuristic_config
from knobtune.systems.postgresql.pgtune import pgtune, pgtune_config
from knobtune.systems.postgresql.pgtune_rules import RULES_PATH, load_pgtune

GIB, MIB, KIB = 1024**3, 1024**2, 1024
COMMIT = "7caef27c204d304623eda21f23e7d56c1ad78d36"
PROFILES = ("web", "oltp", "dw", "desktop", "mixed")
runner = CliRunner()


def test_oltp_on_24_gib_2_cpus_ssd() -> None:
    # RAM = 24 GiB = 25165824 kB; oltp: max_connections 300; 2 CPUs < 4: no parallel settings,
    # so work_mem counts PostgreSQL's 8 worker processes.
    assert pgtune(Machine(24 * GIB, 2, "ssd"), "oltp") == {
        "shared_buffers": 6 * GIB,                # 25165824 / 4 = 6291456 kB
        "huge_pages": "try",                      # 6 GiB >= 2 GiB
        "effective_cache_size": 18 * GIB,         # 25165824 x 3 / 4 = 18874368 kB
        "maintenance_work_mem": 1536 * MIB,       # 25165824 / 16 = 1572864 kB, under the 8 GiB cap
        "min_wal_size": 2 * GIB,                  # oltp: 2048 MB
        "max_wal_size": 8 * GIB,                  # oltp: 8192 MB
        "checkpoint_completion_target": 0.9,
        "wal_buffers": 16 * MIB,                  # 3% of 6291456 = 188743 kB, capped at 16384 kB
        "default_statistics_target": 100,
        "random_page_cost": 1.1,                  # ssd
        "effective_io_concurrency": 200,          # ssd, Linux
        "work_mem": 20426 * KIB,                  # (25165824 - 6291456) / ((300 + 8) x 3) = 20426.8 -> 20426 kB
        "wal_compression": "lz4",                 # PostgreSQL >= 15
        "jit": False,                             # oltp, PostgreSQL >= 12
    }


def test_oltp_with_the_connections_given() -> None:
    result = pgtune_config(Machine(24 * GIB, 2, "ssd", connections=100), "oltp")
    # (25165824 - 6291456) / ((100 + 8) x 3) = 58254.2 -> 58254 kB
    assert result.config["work_mem"] == 58254 * KIB and result.max_connections == 100
    assert result.notes[0].startswith("max_connections = 100 (--connections)")


def test_dw_on_64_gib_16_cpus_hdd_is_clamped_into_the_catalog() -> None:
    # RAM = 64 GiB = 67108864 kB; dw: max_connections 40; 16 CPUs: parallel settings, 16 workers in work_mem.
    result = pgtune_config(Machine(64 * GIB, 16, "hdd"), "dw")
    assert result.config == {
        "shared_buffers": 16 * GIB,               # 67108864 / 4 = 16777216 kB (the catalog's max)
        "huge_pages": "try",
        "effective_cache_size": 24 * GIB,         # 67108864 x 3 / 4 = 48 GiB -> clamped to the catalog's 24 GiB
        "maintenance_work_mem": 4 * GIB,          # dw: 67108864 / 8 = 8 GiB (= PGTune's cap) -> clamped to 4 GiB
        "min_wal_size": 4 * GIB,                  # dw: 4096 MB
        "max_wal_size": 16 * GIB,                 # dw: 16384 MB
        "checkpoint_completion_target": 0.9,
        "wal_buffers": 16 * MIB,                  # 3% of 16777216 = 503316 kB -> 16384 kB
        "default_statistics_target": 500,         # dw
        "random_page_cost": 4.0,                  # hdd (and dw on any disk)
        "effective_io_concurrency": 2,            # hdd
        "work_mem": 149796 * KIB,                 # (67108864 - 16777216) / ((40 + 16) x 3) / 2 = 149796.6 -> 149796 kB
        "wal_compression": "lz4",                 # dw: no jit setting (PostgreSQL's default)
        "max_worker_processes": 16,               # = CPUs
        "max_parallel_workers_per_gather": 4,     # dw: ceil(16 / 2) = 8, uncapped -> clamped to the catalog's 4
        "max_parallel_workers": 16,               # = CPUs
        "max_parallel_maintenance_workers": 4,    # ceil(16 / 2) = 8, capped at 4
        "autovacuum_max_workers": 4,              # 16 <= CPUs < 32
    }
    notes = "\n".join(result.notes)
    assert "effective_cache_size: PGTune gives 48 GiB" in notes and "clamped to 24 GiB" in notes
    assert "maintenance_work_mem: PGTune gives 8 GiB" in notes
    assert "max_parallel_workers_per_gather: PGTune gives 8" in notes
    assert "autovacuum_work_mem = 2GB" in notes  # maintenance_work_mem 8 GiB >= 2 GiB; not in the catalog


def test_mixed_on_64_gib_16_cpus_san() -> None:
    config = pgtune(Machine(64 * GIB, 16, "san"), "mixed")
    assert config["random_page_cost"] == 1.1 and config["effective_io_concurrency"] == 300  # san
    assert config["max_parallel_workers_per_gather"] == 4       # min(ceil(16 / 2), 4)
    assert config["maintenance_work_mem"] == 4 * GIB            # 67108864 / 16 = 4194304 kB
    assert config["work_mem"] == 72315 * KIB                    # 50331648 / ((100 + 16) x 3) / 2 = 72315.6 -> 72315
    assert config["jit"] is False and config["min_wal_size"] == GIB and config["max_wal_size"] == 4 * GIB


def test_desktop_on_a_small_machine_takes_the_floors() -> None:
    # RAM = 1 GiB = 1048576 kB; desktop: max_connections 20; 1 CPU: 8 workers counted.
    result = pgtune_config(Machine(GIB, 1, "ssd"), "desktop")
    assert result.config == {
        "shared_buffers": 64 * MIB,               # 1048576 / 16 = 65536 kB
        "huge_pages": "off",                      # 64 MiB < 2 GiB
        "effective_cache_size": 256 * MIB,        # 1048576 / 4 = 262144 kB
        "maintenance_work_mem": 64 * MIB,         # 1048576 / 16
        "min_wal_size": 100 * MIB,                # desktop: 100 MB
        "max_wal_size": 2 * GIB,                  # desktop: 2048 MB
        "checkpoint_completion_target": 0.9,
        "wal_buffers": 1966 * KIB,                # 3% of 65536 = 1966.08 -> 1966 kB
        "default_statistics_target": 100,
        "random_page_cost": 1.1,
        "effective_io_concurrency": 200,
        "work_mem": 4 * MIB,                      # 983040 / ((20 + 8) x 3) / 6 = 1950 kB -> the 4 MB floor
        "wal_compression": "lz4",
    }
    notes = "\n".join(result.notes)
    assert "wal_level = minimal" in notes and "max_wal_senders = 0" in notes


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("machine", [Machine(GIB, 1, "ssd"), Machine(24 * GIB, 2, "hdd"),
                                     Machine(64 * GIB, 16, "san"), Machine(512 * GIB, 64, "ssd", 5000)])
def test_every_value_is_a_catalog_knob_in_range(profile: str, machine: Machine) -> None:
    catalog = load_catalog("postgresql")
    config = pgtune(machine, profile)
    assert set(config) <= set(catalog.knobs)
    full = catalog.config(config)  # parses, range-checks, checks max_wal_size >= min_wal_size
    assert {k: full[k] for k in config} == config


def test_unknown_profile_is_a_one_line_error() -> None:
    with pytest.raises(UsageError) as caught:
        pgtune(Machine(24 * GIB, 2), "olap")
    message = str(caught.value)
    assert "\n" not in message and "'olap'" in message and "web, oltp, dw, desktop, mixed" in message


def test_the_rules_file_names_its_source_commit() -> None:
    rules = load_pgtune()
    assert rules.source.commit == COMMIT and rules.source.repository == "le0pard/pgtune"
    assert COMMIT in RULES_PATH.read_text().split("[source]")[0]  # the header comment
    assert list(rules.profiles) == list(PROFILES) and set(rules.disks) == set(DISKS)


SAN = "[disks.san]\nrandom_page_cost = 1.1\neffective_io_concurrency = 300\n"


@pytest.mark.parametrize(("change", "expected"), [
    (("[source]", "[sources]"), "unknown field 'sources' (did you mean 'source'?)"),
    (("work_mem_min_bytes =", "work_mem_minimum ="), "unknown field 'rules.work_mem_minimum'"),
    (("effective_io_concurrency = 2\n", "effective_io_concurency = 2\n"),
     "unknown field 'disks.hdd.effective_io_concurency'"),
    (("work_mem_divisor = 1\n", "work_mem_divisr = 1\n"), "unknown field 'profiles.web.work_mem_divisr'"),
    (("max_connections = 300\n", ""), "no 'profiles.oltp.max_connections'"),
    (("default_statistics_target = 500", 'default_statistics_target = "many"'),
     "profiles.dw.default_statistics_target 'many' is not a whole number"),
    (("random_page_cost = 4.0", 'random_page_cost = "4"'), "disks.hdd.random_page_cost '4' is not a number"),
    (("jit = false", 'jit = "no"'), "profiles.web.jit 'no' is not true or false"),
    (('wal_buffers_max_bytes = "16MiB"', 'wal_buffers_max_bytes = "16 parsecs"'),
     "rules.wal_buffers_max_bytes '16 parsecs' is not a size"),
    (('work_mem_min_bytes = "4MiB"', 'work_mem_min_bytes = "lots"'), "rules.work_mem_min_bytes 'lots' is not a size"),
    (("parallel_from_cpus = 4", "parallel_from_cpus = -4"), "rules.parallel_from_cpus -4 is not a positive number"),
    (("checkpoint_completion_target = 0.9", "checkpoint_completion_target = 1.9"),
     "rules.checkpoint_completion_target 1.9 is above 1"),
    (('wal_compression = "lz4"', 'wal_compression = "lz5"'), "rules.wal_compression 'lz5' is not a wal_compression"),
    (('os = "linux"', 'os = "windows"'), "source.os 'windows' is not an operating system"),
    ((SAN, ""), "no [disks.san]"),
    ((SAN, SAN + "\n[disks.nvme]\nrandom_page_cost = 1.1\neffective_io_concurrency = 1000\n"),
     "unknown disk 'disks.nvme'"),
    (("[[32, 5], [16, 4]]", "[[32, 5], [16]]"), "rules.autovacuum_max_workers [16] is not two whole numbers"),
    (("[[32, 5], [16, 4]]", "[[32, 5], [16, 4.5]]"), "rules.autovacuum_max_workers [16, 4.5] is not two whole"),
    (("[[32, 5], [16, 4]]", "[32, 5]"), "rules.autovacuum_max_workers [32, 5] is not a list of non-empty lists"),
    (("shared_buffers = [1, 16]", "shared_buffers = [16, 1]"),
     "profiles.desktop.shared_buffers [16, 1] is not a fraction of RAM"),
    (("effective_cache_size = [3, 4]", "effective_cache_size = [3, 4, 5]"),
     "profiles.web.effective_cache_size [3, 4, 5] is not a fraction of RAM"),
])
def test_a_broken_rules_file_names_file_and_field_in_one_line(tmp_path: Path, change: tuple[str, str],
                                                              expected: str) -> None:
    broken = tmp_path / "pgtune.toml"
    assert change[0] in RULES_PATH.read_text()
    broken.write_text(RULES_PATH.read_text().replace(*change, 1))
    with pytest.raises(CatalogError) as caught:
        load_pgtune(broken)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{broken}: ") and expected in message and "Fix: " in message


def test_machine_from_host_and_bad_facts(tmp_path: Path) -> None:
    here = Machine.from_host()
    assert here.memory_bytes > GIB // 4 and here.cpus == os.cpu_count() and here.disk in DISKS
    assert Machine.from_host("san", 50) == Machine(here.memory_bytes, here.cpus, "san", 50)
    with pytest.raises(UsageError, match="disk type 'nvme'"):
        Machine(GIB, 1, "nvme")
    with pytest.raises(UsageError, match="--connections 0"):
        Machine(GIB, 1, "ssd", 0)


def test_rotational_disks_skip_virtual_devices(tmp_path: Path) -> None:
    block = tmp_path / "block"
    for parent, name, flag in (("pci", "sda", "1"), ("pci", "nvme0n1", "0"), ("virtual/block", "loop0", "1")):
        device = tmp_path / "devices" / parent / name
        (device / "queue").mkdir(parents=True)
        (device / "queue" / "rotational").write_text(flag + "\n")
        block.mkdir(exist_ok=True)
        (block / name).symlink_to(device)
    assert rotational_disks(block) == ["sda"]


def test_cli_writes_a_file_compare_loads(tmp_path: Path) -> None:
    path = tmp_path / "pgtune.json"
    result = runner.invoke(app, ["baseline", "postgresql", "--profile", "oltp", "--disk", "ssd", "-o", str(path)],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert COMMIT in result.stdout and "work_mem" in result.stdout and "max_connections 300" in result.stdout
    data = json.loads(path.read_text())
    assert {k: data[k] for k in ("system", "baseline", "profile")} == \
        {"system": "postgresql", "baseline": "pgtune", "profile": "oltp"}
    assert data["machine"]["disk"] == "ssd" and data["machine"]["cpus"] == os.cpu_count()
    changed = load_config_file(path)  # what `compare --config FILE` reads
    assert changed == pgtune(Machine.from_host("ssd"), "oltp")
    full = load_catalog("postgresql").config(changed)
    assert full["wal_compression"] == "lz4" and full["jit"] is False


def test_cli_json_and_help() -> None:
    result = runner.invoke(app, ["baseline", "postgresql", "--profile", "web", "--disk", "hdd", "--connections", "50",
                                 "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["max_connections"] == 50 and data["config"]["random_page_cost"] == 4.0
    help_text = runner.invoke(app, ["baseline", "--help"]).stdout.replace("\n", " ")
    assert "Example: knobtune baseline postgresql --profile oltp -o pgtune.json" in help_text


def _error(*args: str) -> str:
    """Run the real entry point (as users do); it must exit 2 with one error line (as tests/test_cli.py does)."""
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", *args], capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.slow
def test_cli_errors() -> None:
    line = _error("baseline", "postgresql", "--profile", "olap")
    assert "unknown PGTune profile 'olap'" in line and "web, oltp, dw, desktop, mixed" in line
    line = _error("baseline", "leveldb")
    assert "no baseline for system 'leveldb'" in line
    assert "postgresql (pgtune)" in line and "rocksdb (rocksdb-guide)" in line
    assert "rocksdb-guide has no profiles" in _error("baseline", "rocksdb", "--profile", "oltp")
    assert "PGTune needs the database type" in _error("baseline", "postgresql")
    assert "'nvme' is not one of ssd, hdd, san" in _error("baseline", "postgresql", "--profile", "oltp", "--disk",
                                                          "nvme")


def test_the_rocksdb_guide_is_one_config_in_catalog_units(tmp_path: Path) -> None:
    """The wiki's "Setup Options and Basic Tuning" starting point, the same on every machine; compare can load it."""
    path = tmp_path / "guide.json"
    result = runner.invoke(app, ["baseline", "rocksdb", "-o", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "Setup-Options-and-Basic-Tuning" in result.stdout and "16 KiB" in result.stdout
    assert load_config_file(path) == {
        "level_compaction_dynamic_level_bytes": True, "max_background_jobs": 6, "bytes_per_sync": MIB,
        "block_size": 16 * KIB, "cache_index_and_filter_blocks": True, "pin_l0_filter_and_index_blocks_in_cache": True}


def test_the_configs_published_for_db_bench_are_fitted_with_notes(tmp_path: Path) -> None:
    """tools/benchmark.sh's two configs: what lies outside the catalog's range is clamped and said, what the catalog
    lacks is named; `--name` picks one and compare can load it."""
    universal = heuristic_config("rocksdb", Machine(24 * GIB, 2), None, "db-bench-universal")
    assert universal.config["compaction_style"] == "universal" and universal.config["write_buffer_size"] == 128 * MIB
    assert universal.config["num_levels"] == 10 and universal.config["cache_size"] == 8 * GIB  # 40 and 16 GiB
    assert any("num_levels: db-bench-universal gives 40" in note and "clamped to 10" in note
               for note in universal.notes)
    assert any(note.startswith("universal_max_merge_width is left out") for note in universal.notes)
    leveled = heuristic_config("rocksdb", Machine(24 * GIB, 2), None, "db-bench-leveled")
    assert leveled.config["compaction_style"] == "level" and leveled.config["max_bytes_for_level_base"] == GIB
    assert "tools/benchmark.sh at v7.8.3" in leveled.describe()[0]

    path = tmp_path / "universal.json"
    result = runner.invoke(app, ["baseline", "rocksdb", "--name", "db-bench-universal", "-o", str(path)],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert load_config_file(path)["compaction_style"] == "universal"
    line = _error("baseline", "rocksdb", "--name", "db-bench")
    assert "rocksdb has no baseline called 'db-bench'" in line and "db-bench-leveled, db-bench-universal" in line


def test_a_fixed_config_naming_a_knob_the_catalog_lacks_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[source]\npage = "https://x"\n[config]\nwrite_buffer = "64MiB"\n')
    with pytest.raises(CatalogError, match="unknown knob 'write_buffer'.*catalog's knob names"):
        fixed_config("rocksdb", tmp_path / "bad.toml", Machine(GIB, 1))
