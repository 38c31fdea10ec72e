"""The shipped PostgreSQL 15 catalog against the installed server: every knob is a real setting, with its default.

Names, contexts, types and limits come from ``postgres --describe-config``. Its
default column cannot be used for integer, real and boolean settings:
PostgreSQL 15 prints their reset value before it is initialised, 0 or FALSE
for all of them (fsync shows FALSE, shared_buffers 0). Those defaults are read
with ``postgres -C NAME`` over an empty configuration file instead, which
prints the built-in value in the setting's base unit and needs no cluster and
no running server. Enum defaults are read from both.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest

from knobtune.knobs import Catalog, Knob, KnobType, Safety, Value, load_catalog
from knobtune.tuning import build_space

POSTGRES = Path("/usr/lib/postgresql/15/bin/postgres")
PG_USER = "postgres"

REQUIRED = [
    # the 16 settings of the published rankings and PGTune's rules
    "bgwriter_lru_maxpages", "checkpoint_completion_target", "checkpoint_timeout", "default_statistics_target",
    "effective_cache_size", "effective_io_concurrency", "max_parallel_maintenance_workers",
    "max_parallel_workers_per_gather", "max_wal_size", "random_page_cost", "shared_buffers", "temp_buffers",
    "wal_buffers", "wal_compression", "wal_writer_delay", "work_mem",
    # and these 9
    "commit_delay", "commit_siblings", "backend_flush_after", "wal_writer_flush_after", "bgwriter_delay",
    "huge_pages", "jit", "autovacuum_vacuum_scale_factor", "autovacuum_analyze_scale_factor",
    # durability
    "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
]
UNSAFE = {"fsync": Safety.DURABILITY, "synchronous_commit": Safety.DURABILITY, "full_page_writes": Safety.DURABILITY,
          "autovacuum": Safety.OPERATIONAL}

# Base units as PostgreSQL 15 defines them (pg_settings.unit; --describe-config prints no unit column).
PAGE, KB, MB = 8192, 1024, 1024**2
BYTES_PER_UNIT = {
    "shared_buffers": PAGE, "wal_buffers": PAGE, "effective_cache_size": PAGE, "temp_buffers": PAGE,
    "backend_flush_after": PAGE, "bgwriter_flush_after": PAGE, "checkpoint_flush_after": PAGE,
    "wal_writer_flush_after": PAGE, "min_parallel_table_scan_size": PAGE,
    "work_mem": KB, "maintenance_work_mem": KB,
    "max_wal_size": MB, "min_wal_size": MB,
}
SECONDS_PER_UNIT = {
    "checkpoint_timeout": 1.0, "autovacuum_naptime": 1.0,
    "wal_writer_delay": 0.001, "bgwriter_delay": 0.001, "autovacuum_vacuum_cost_delay": 0.001,
}
PG_TYPES = {
    KnobType.INT: ("INTEGER",), KnobType.FLOAT: ("REAL",), KnobType.BYTES: ("INTEGER",),
    KnobType.DURATION: ("INTEGER", "REAL"), KnobType.BOOL: ("BOOLEAN",), KnobType.ENUM: ("ENUM",),
}


@dataclass(frozen=True)
class Setting:
    """One row of ``postgres --describe-config``."""

    context: str
    type: str
    default: str
    min: str
    max: str


@dataclass(frozen=True)
class Server:
    """The installed postgres binary, run as an unprivileged user over an empty configuration."""

    settings: dict[str, Setting]
    empty_dir: Path

    def show(self, name: str, *settings: str) -> subprocess.CompletedProcess[str]:
        """``postgres -C name`` with ``-c`` for each of ``settings``: the value in the setting's base unit."""
        argv = [str(POSTGRES), "-D", str(self.empty_dir)]
        for setting in settings:
            argv += ["-c", setting]
        return _run([*argv, "-C", name], cwd=self.empty_dir)

    def boot_value(self, name: str) -> str:
        done = self.show(name)
        assert done.returncode == 0, f"postgres -C {name} failed: {done.stderr}"
        return done.stdout.strip()


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:  # postgres refuses to run as root
        argv = ["runuser", "-u", PG_USER, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    if not POSTGRES.exists():
        pytest.skip(f"PostgreSQL 15 is not installed ({POSTGRES} is missing; apt-get install postgresql-15)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            pytest.skip(f"running as root and there is no '{PG_USER}' user to run PostgreSQL as")
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser is missing to run PostgreSQL as another user")
    described = _run([str(POSTGRES), "--describe-config"], cwd=Path("/"))
    assert described.returncode == 0, f"postgres --describe-config failed: {described.stderr}"
    settings = {}
    for line in described.stdout.splitlines():
        name, context, _group, pg_type, default, low, high, *_ = line.split("\t")
        settings[name] = Setting(context, pg_type, default, low, high)
    # An empty data directory with an empty postgresql.conf, readable by the server's user.
    empty_dir = Path(tempfile.mkdtemp(prefix="knobtune-pg-"))
    try:
        empty_dir.chmod(0o755)
        (empty_dir / "postgresql.conf").write_text("")
        (empty_dir / "postgresql.conf").chmod(0o644)
        yield Server(settings, empty_dir)
    finally:
        shutil.rmtree(empty_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgresql() -> Catalog:
    return load_catalog("postgresql")


def to_ours(knob: Knob, raw: str) -> Value:
    """A value as PostgreSQL prints it (base unit, no unit suffix) in the catalog's unit."""
    if knob.type is KnobType.BOOL:
        assert raw in ("on", "off"), f"{knob.name}: {raw!r} is not on or off"
        return raw == "on"
    if knob.type is KnobType.ENUM:
        return raw
    number = float(raw)
    if number in knob.special:  # PostgreSQL's own -1 (another setting decides) and 0 (off) need no unit
        return number
    if knob.type is KnobType.BYTES:
        return int(raw) * BYTES_PER_UNIT[knob.name]
    if knob.type is KnobType.DURATION:
        return number * SECONDS_PER_UNIT[knob.name]
    return int(raw) if knob.type is KnobType.INT else number


def to_pg_units(knob: Knob, value: float) -> float:
    """A value of ours in the setting's base unit (to compare with describe-config's limits)."""
    if knob.type is KnobType.BYTES and value not in knob.special:
        return value / BYTES_PER_UNIT[knob.name]
    if knob.type is KnobType.DURATION and value not in knob.special:
        return value / SECONDS_PER_UNIT[knob.name]
    return value


def spelled_with_unit(knob: Knob, value: float) -> str:
    """How a setting is written with an explicit unit: sizes in kB, times in ms."""
    if knob.type is KnobType.BYTES:
        assert value % 1024 == 0, f"{knob.name}: {value} is not a whole number of KiB"
        return f"{int(value) // 1024}kB"
    return f"{round(value * 1000, 6):g}ms"


def same(ours: Value, theirs: Value) -> bool:
    if isinstance(ours, float) or isinstance(theirs, float):
        return not isinstance(ours, bool) and ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)
    return ours == theirs


def test_catalog_loads_and_holds_the_chosen_settings(postgresql) -> None:
    assert (postgresql.system, postgresql.version, postgresql.formats) == ("postgresql", "15", ("postgresql",))
    assert len(postgresql.knobs) >= 30
    assert [name for name in REQUIRED if name not in postgresql.knobs] == []
    assert all(knob.description for knob in postgresql.knobs.values())


def test_every_size_and_time_has_a_base_unit(postgresql) -> None:
    sizes = {n for n, k in postgresql.knobs.items() if k.type is KnobType.BYTES}
    times = {n for n, k in postgresql.knobs.items() if k.type is KnobType.DURATION}
    assert (sizes, times) == (set(BYTES_PER_UNIT), set(SECONDS_PER_UNIT))


def test_every_knob_is_a_postgresql_15_setting_with_its_type_and_context(postgresql, server) -> None:
    for knob in postgresql.knobs.values():
        assert knob.name in server.settings, f"{knob.name} is not a PostgreSQL 15 setting"
        setting = server.settings[knob.name]
        assert setting.type in PG_TYPES[knob.type], \
            f"{knob.name}: PostgreSQL's type is {setting.type}, the catalog's {knob.type}"
        assert knob.restart == (setting.context == "postmaster"), \
            f"{knob.name}: context {setting.context}, but the catalog says restart = {knob.restart}"


def test_defaults_are_the_servers_own(postgresql, server) -> None:
    for knob in postgresql.knobs.values():
        setting = server.settings[knob.name]
        builtin = to_ours(knob, server.boot_value(knob.name))
        assert same(knob.default, builtin), f"{knob.name}: postgres -C says {builtin!r}, catalog says {knob.default!r}"
        # describe-config's default column is right for enums; for the others it is PostgreSQL 15's
        # uninitialised 0 / FALSE, and it must agree whenever it prints anything else
        if knob.type is KnobType.ENUM or setting.default not in ("0", "FALSE"):
            described = to_ours(knob, {"TRUE": "on", "FALSE": "off"}.get(setting.default, setting.default))
            assert same(knob.default, described), f"{knob.name}: describe-config says {setting.default}"


def test_ranges_and_special_values_lie_within_postgresqls_limits(postgresql, server) -> None:
    for knob in (k for k in postgresql.knobs.values() if k.is_numeric):
        setting = server.settings[knob.name]
        low, high = float(setting.min), float(setting.max)
        for value in (knob.min, knob.max, *knob.special):
            assert low <= to_pg_units(knob, value) <= high, \
                f"{knob.name}: {value} is outside PostgreSQL's limits [{setting.min}, {setting.max}] (base units)"


def test_the_server_reads_the_bounds_as_the_catalog_means_them(postgresql, server) -> None:
    """Each size and time bound, written with an explicit unit, comes back from the server as the same value:
    the base units above are the server's, and the bounds are values it accepts."""
    for knob in (k for k in postgresql.knobs.values() if k.type in (KnobType.BYTES, KnobType.DURATION)):
        for bound in (knob.min, knob.max):
            text = spelled_with_unit(knob, bound)
            done = server.show(knob.name, f"{knob.name}={text}")
            assert done.returncode == 0, f"{knob.name}={text} is refused: {done.stderr.strip()}"
            assert same(to_ours(knob, done.stdout.strip()), bound), \
                f"{knob.name}={text} reads back as {done.stdout.strip()} base units"


def test_the_server_accepts_every_enum_choice(postgresql, server) -> None:
    for knob in (k for k in postgresql.knobs.values() if k.type is KnobType.ENUM):
        for choice in knob.choices:
            done = server.show(knob.name, f"{knob.name}={choice}")
            assert done.returncode == 0, f"{knob.name}={choice} is refused: {done.stderr.strip()}"
            assert done.stdout.strip() in knob.choices  # wal_compression=on reads back as its alias pglz


def test_unsafe_settings_stay_out_of_the_default_search(postgresql) -> None:
    space = build_space(postgresql)
    assert dict(space.left_out) == UNSAFE
    assert "fsync" not in space.knobs and "full_page_writes" not in space.knobs
    assert {"checkpoint_timeout", "max_wal_size"} <= set(space.knobs)  # safe: --max-recovery-time bounds them
    assert "autovacuum" not in space.knobs  # operational: off leaves dead rows for ever
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    for _ in range(60):
        trial = study.ask()
        config, _ = space.suggest(trial)
        study.tell(trial, 1.0)
        assert config["fsync"] is True and config["full_page_writes"] is True
        assert config["synchronous_commit"] != "off" and config["autovacuum"] is True
        assert config["max_wal_size"] >= config["min_wal_size"]
        postgresql.config(postgresql.changed(config))  # every sample is a valid config
    unsafe = build_space(postgresql, allow_unsafe=True)
    assert unsafe.left_out == {} and {"fsync", "full_page_writes", "synchronous_commit"} <= set(unsafe.knobs)


def test_unsafe_values_are_specific(postgresql) -> None:
    sync = postgresql.knobs["synchronous_commit"]
    assert sync.is_unsafe("off") and not any(sync.is_unsafe(v) for v in ("on", "local", "remote_write", "remote_apply"))
    assert postgresql.knobs["fsync"].is_unsafe(False) and not postgresql.knobs["fsync"].is_unsafe(True)
    assert postgresql.knobs["full_page_writes"].is_unsafe(False)
    assert postgresql.knobs["wal_sync_method"].safety is Safety.SAFE
    assert postgresql.knobs["autovacuum"].safety is Safety.OPERATIONAL


def test_memory_model_at_the_defaults(postgresql) -> None:
    # shared_buffers 128 MiB + wal_buffers auto (-1 counts as 0) + maintenance_work_mem 64 MiB + temp_buffers 8 MiB
    assert postgresql.memory.planned_bytes(postgresql.defaults()) == (128 + 64 + 8) * 2**20
    assert postgresql.memory.write_buffer_bytes({**postgresql.defaults(), "wal_buffers": 16 * 2**20}) == 16 * 2**20
