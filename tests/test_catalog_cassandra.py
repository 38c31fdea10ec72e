"""The shipped Cassandra 5.0 catalog: valid, complete, and every yaml knob a real field of Cassandra's Config.

The Config check needs the cassandra-all jar that ``scripts/cassandra-fetch``
copies into ``${KNOBTUNE_CACHE:-~/.cache/knobtune}/cassandra/lib`` and Java 17's
``javap``; without them it is skipped. ``javap`` lists the public fields of
``org.apache.cassandra.config.Config`` with their types (not their initial
values), so the check is: the field exists, its type fits the knob's type,
enum choices are constants of the field's enum, and sizes and durations are
whole multiples of the smallest unit the field's type accepts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import optuna
import pytest

from knobtune.knobs import Catalog, Knob, KnobType, Safety, load_catalog
from knobtune.tuning import build_space

YAML, JVM = "cassandra-yaml", "jvm"
TOP_5 = ["concurrent_reads", "native_transport_max_threads", "memtable_heap_space", "memtable_cleanup_threshold",
         "compaction_throughput"]  # the knob-importance study's top 5 for Cassandra under YCSB-A
REQUIRED = TOP_5 + [
    "concurrent_writes", "concurrent_counter_writes", "memtable_offheap_space", "memtable_flush_writers",
    "memtable_allocation_type", "concurrent_compactors", "commitlog_sync", "commitlog_sync_period",
    "commitlog_sync_group_window", "commitlog_segment_size", "commitlog_compression", "key_cache_size",
    "row_cache_size", "counter_cache_size", "file_cache_size", "buffer_pool_use_heap_if_exhausted",
    "column_index_size", "column_index_cache_size", "trickle_fsync", "trickle_fsync_interval", "disk_access_mode",
    "sstable_preemptive_open_interval", "auto_snapshot", "snapshot_before_compaction",
    "jvm_heap_size", "jvm_gc", "jvm_max_direct_memory",
]
# Cassandra 4.x spellings that 5.0 reads only through @Replaces: the catalog must use the new names.
OLD_NAMES = ["memtable_heap_space_in_mb", "compaction_throughput_mb_per_sec", "commitlog_sync_period_in_ms",
             "key_cache_size_in_mb", "column_index_size_in_kb", "trickle_fsync_interval_in_kb",
             "commitlog_segment_size_in_mb", "file_cache_size_in_mb", "row_cache_size_in_mb"]
UNSAFE = {"commitlog_compression": Safety.DURABILITY, "auto_snapshot": Safety.OPERATIONAL,
          "snapshot_before_compaction": Safety.OPERATIONAL}
KiB, MiB, GiB = 1024, 1024**2, 1024**3

JAVAP = Path("/usr/lib/jvm/java-17-openjdk-amd64/bin/javap")
CONFIG_CLASS = "org.apache.cassandra.config.Config"
# javap's field type -> the catalog types it fits, and for sizes and durations the smallest unit accepted
SIMPLE_TYPES = {
    "int": {KnobType.INT}, "java.lang.Integer": {KnobType.INT}, "long": {KnobType.INT},
    "java.lang.Long": {KnobType.INT}, "boolean": {KnobType.BOOL}, "java.lang.Boolean": {KnobType.BOOL},
    "float": {KnobType.FLOAT}, "java.lang.Float": {KnobType.FLOAT}, "double": {KnobType.FLOAT},
    "java.lang.Double": {KnobType.FLOAT},
}
SIZE_UNIT = {"Bytes": 1, "Kibibytes": KiB, "Mebibytes": MiB}
DURATION_UNIT_S = {"Nanoseconds": 1e-9, "Milliseconds": 0.001, "Seconds": 1.0, "Minutes": 60.0}
FIELD = re.compile(r"^\s*public (?:volatile |final |transient )*([\w.$<>\[\], ]+?) (\w+);$")


@pytest.fixture(scope="module")
def cassandra() -> Catalog:
    return load_catalog("cassandra")


def yaml_knobs(catalog: Catalog) -> list[Knob]:
    return [knob for knob in catalog.knobs.values() if knob.supports(YAML)]


# ---------------------------------------------------------------- the catalog itself


def test_catalog_covers_the_published_study_and_the_brief(cassandra: Catalog) -> None:
    assert cassandra.system == "cassandra" and cassandra.version.startswith("5.0.")
    assert 30 <= len(cassandra.knobs) <= 40
    assert [name for name in REQUIRED if name not in cassandra.knobs] == []
    assert [name for name in OLD_NAMES if name in cassandra.knobs] == []


def test_every_knob_is_set_through_exactly_one_format(cassandra: Catalog) -> None:
    assert cassandra.formats == (YAML, JVM)
    for knob in cassandra.knobs.values():
        assert knob.supports(YAML) != knob.supports(JVM), knob.name
        jvm_side = knob.supports(JVM)
        assert jvm_side == knob.name.startswith("jvm_") == (knob.group == "jvm"), knob.name
        if jvm_side:
            assert knob.names[JVM].startswith("-X"), knob.name
        else:
            assert knob.names[YAML] == knob.name, "a yaml knob is named as cassandra.yaml spells it"


def test_every_knob_needs_a_restart_and_says_what_it_does(cassandra: Catalog) -> None:
    assert [k.name for k in cassandra.knobs.values() if not k.restart] == []
    assert [k.name for k in cassandra.knobs.values() if len(k.description) < 20] == []


def test_safety_classes(cassandra: Catalog) -> None:
    unsafe = {name: knob.safety for name, knob in cassandra.knobs.items() if knob.safety is not Safety.SAFE}
    assert unsafe == UNSAFE
    compression = cassandra["commitlog_compression"]
    assert not compression.is_unsafe("none") and compression.is_unsafe("lz4")
    assert not cassandra["auto_snapshot"].is_unsafe(True) and cassandra["auto_snapshot"].is_unsafe(False)
    assert cassandra["snapshot_before_compaction"].is_unsafe(True)
    # batch and group only wait for more fsyncs than the default
    assert not any(cassandra["commitlog_sync"].is_unsafe(mode) for mode in ("batch", "group"))


def test_commit_log_knobs_matter_only_under_their_sync_mode(cassandra: Catalog) -> None:
    period, window = cassandra["commitlog_sync_period"], cassandra["commitlog_sync_group_window"]
    for mode, period_applies, window_applies in [("periodic", True, False), ("batch", False, False),
                                                 ("group", False, True)]:
        config = cassandra.config({"commitlog_sync": mode})
        assert (period.applies(config), window.applies(config)) == (period_applies, window_applies), mode
    # a change to the period under batch is not rendered: Cassandra refuses a period with batch or group
    changed = cassandra.changed(cassandra.config({"commitlog_sync": "batch", "commitlog_sync_period": "2s"}))
    assert changed == {"commitlog_sync": "batch"}
    # group sync needs a window: the search never proposes the unset 0
    assert window.search_special is False and 0 in window.special


def test_defaults_are_cassandras(cassandra: Catalog) -> None:
    defaults = cassandra.defaults()
    assert defaults["concurrent_reads"] == defaults["concurrent_writes"] == 32
    assert defaults["native_transport_max_threads"] == 128
    assert defaults["compaction_throughput"] == 64 * MiB
    assert defaults["commitlog_segment_size"] == 32 * MiB
    assert defaults["commitlog_sync"] == "periodic" and defaults["commitlog_sync_period"] == 10.0
    assert defaults["trickle_fsync_interval"] == 10240 * KiB
    assert defaults["disk_access_mode"] == "mmap_index_only"
    assert defaults["memtable_allocation_type"] == "heap_buffers"
    assert defaults["jvm_heap_size"] == GiB
    # values Cassandra computes when the field is left unset are special values, never a guessed number
    for name in ("memtable_heap_space", "memtable_offheap_space", "memtable_cleanup_threshold", "key_cache_size",
                 "counter_cache_size", "file_cache_size", "networking_cache_size", "concurrent_compactors",
                 "memtable_flush_writers", "column_index_size"):
        knob = cassandra[name]
        assert knob.default in knob.special, name


def test_memory_plan_at_the_defaults_is_the_heap(cassandra: Catalog) -> None:
    assert cassandra.memory.planned_bytes(cassandra.defaults()) == GiB
    bigger = cassandra.config({"jvm_heap_size": "4GiB", "row_cache_size": "256MiB", "file_cache_size": "512MiB"})
    assert cassandra.memory.planned_bytes(bigger) == 4 * GiB + 768 * MiB


def test_the_default_search_samples_valid_configs(cassandra: Catalog) -> None:
    space = build_space(cassandra)
    assert not set(space.knobs) & {"snapshot_before_compaction", "auto_snapshot"}  # their other value is unsafe
    assert not set(space.knobs) & {"row_cache_size", "counter_cache_size", "concurrent_counter_writes"}
    assert set(TOP_5) <= set(space.knobs)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    for _ in range(40):
        trial = study.ask()
        config, _ = space.suggest(trial)
        assert cassandra.config(cassandra.changed(config)) is not None
        assert cassandra.unsafe_in(config) == {}  # commitlog_compression stays at none
        if config["commitlog_sync"] == "group":
            assert config["commitlog_sync_group_window"] > 0
        study.tell(trial, 0.0)


# ---------------------------------------------------------------- against Cassandra's own Config class


def _javap() -> str | None:
    return str(JAVAP) if JAVAP.exists() else shutil.which("javap")


def _cassandra_jar() -> Path:
    cache = Path(os.environ.get("KNOBTUNE_CACHE") or Path.home() / ".cache" / "knobtune")
    jars = sorted((cache / "cassandra" / "lib").glob("cassandra-all-5.0.*.jar"))
    jars = [jar for jar in jars if not jar.name.endswith(("-sources.jar", "-tests.jar"))]
    if not jars or _javap() is None:
        pytest.skip("needs the cassandra-all jar (run scripts/cassandra-fetch) and Java 17's javap")
    return jars[-1]


def _javap_fields(jar: Path, class_name: str) -> dict[str, str]:
    """The public fields ``javap`` lists for ``class_name``: name -> Java type."""
    result = subprocess.run([_javap() or "javap", "-cp", str(jar), class_name], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return {m.group(2): m.group(1) for line in result.stdout.splitlines() if (m := FIELD.match(line))}


@pytest.fixture(scope="module")
def config_fields() -> tuple[Path, dict[str, str]]:
    jar = _cassandra_jar()
    return jar, _javap_fields(jar, CONFIG_CLASS)


def test_the_catalog_names_the_jar_version(cassandra: Catalog, config_fields: tuple[Path, dict[str, str]]) -> None:
    jar, _ = config_fields
    version = jar.stem.removeprefix("cassandra-all-")
    assert version == cassandra.version, (f"the catalog was read from Cassandra {cassandra.version}, the jar is "
                                          f"{version}: re-read Config.java of {version} and update the catalog")


def test_every_yaml_knob_is_a_config_field_of_a_fitting_type(
        cassandra: Catalog, config_fields: tuple[Path, dict[str, str]]) -> None:
    jar, fields = config_fields
    assert len(fields) > 200, "javap listed too few Config fields: is the jar whole?"
    missing = [knob.name for knob in yaml_knobs(cassandra) if knob.name not in fields]
    assert missing == [], f"not fields of {CONFIG_CLASS} in {jar.name}"
    for knob in yaml_knobs(cassandra):
        java_type = fields[knob.name]
        if java_type in SIMPLE_TYPES:
            assert knob.type in SIMPLE_TYPES[java_type], f"{knob.name}: {java_type} is not {knob.type}"
        elif "DataStorageSpec$" in java_type or "DataRateSpec$" in java_type:
            assert knob.type is KnobType.BYTES, f"{knob.name}: {java_type} is a size"
        elif "DurationSpec$" in java_type:
            assert knob.type is KnobType.DURATION, f"{knob.name}: {java_type} is a duration"
        elif "Config$" in java_type:
            constants = set(_javap_fields(jar, java_type))
            assert knob.type is KnobType.ENUM and set(knob.choices) <= constants, (knob.name, constants)
        elif java_type.endswith("ParameterizedClass"):
            assert knob.type is KnobType.ENUM, f"{knob.name}: a class choice is written as an enum"
        else:
            pytest.fail(f"{knob.name}: javap type {java_type} is not one the catalog can express")


def test_sizes_and_durations_are_whole_units_of_their_field(
        cassandra: Catalog, config_fields: tuple[Path, dict[str, str]]) -> None:
    _, fields = config_fields
    for knob in yaml_knobs(cassandra):
        java_type = fields[knob.name]
        size = re.search(r"DataStorageSpec\$(?:Int|Long)(\w+?)Bound", java_type)
        duration = re.search(r"DurationSpec\$(?:Int|Long)(\w+?)Bound", java_type)
        if not (size or duration):
            continue
        values = [v for v in (knob.default, knob.min, knob.max) if v not in knob.special]
        if size:
            unit = SIZE_UNIT[size.group(1)]
            assert all(int(v) % unit == 0 for v in values), f"{knob.name}: {java_type} takes whole {size.group(1)}"
        else:
            unit_s = DURATION_UNIT_S[duration.group(1)]
            assert all(abs(v / unit_s - round(v / unit_s)) < 1e-6 for v in values), knob.name


def test_commit_log_compressors_exist_in_the_jar(
        cassandra: Catalog, config_fields: tuple[Path, dict[str, str]]) -> None:
    jar, _ = config_fields
    spelled = cassandra["commitlog_compression"].spell[YAML]
    classes = {re.search(r"class_name: (\w+)", text).group(1) for text in spelled.values()}  # type: ignore[union-attr]
    with zipfile.ZipFile(jar) as archive:
        entries = set(archive.namelist())
    assert {f"org/apache/cassandra/io/compress/{name}.class" for name in classes} <= entries
