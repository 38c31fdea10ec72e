"""The MariaDB 10.11 catalog against the installed server: every knob is a real variable, with its default.

Defaults come from ``mariadbd --no-defaults --verbose --help``: the table at its
end prints every variable's built-in value (names spelled with dashes) and needs
no data directory. A scratch server (a data directory made by
``mariadb-install-db`` in a temporary folder, a Unix socket only) gives
``information_schema.SYSTEM_VARIABLES``: READ_ONLY for the restart flags, the
numeric limits, the enum values, and the values --help cannot tell:
``table_open_cache``'s built-in default (--help prints it already cut to the
open-files limit) and the ``innodb_io_capacity_max`` a running server derives
from --help's "auto" marker.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest

from knobtune.knobs import Catalog, Knob, KnobType, Safety, Value, load_catalog
from knobtune.tuning import build_space

CATALOG = Path(__file__).parents[1] / "knobtune" / "systems" / "mariadb" / "catalog.toml"
MARIADBD = Path("/usr/sbin/mariadbd")
INSTALL_DB = "mariadb-install-db"
CLIENT = "mariadb"
SERVER_USER = "mysql"
START_TIMEOUT_S = 60.0

REQUIRED = [
    "innodb_buffer_pool_size", "innodb_log_file_size", "innodb_log_buffer_size", "innodb_flush_log_at_trx_commit",
    "innodb_flush_method", "innodb_io_capacity", "innodb_io_capacity_max", "innodb_doublewrite",
    "innodb_adaptive_hash_index", "innodb_max_dirty_pages_pct", "innodb_max_dirty_pages_pct_lwm",
    "innodb_adaptive_flushing", "innodb_adaptive_flushing_lwm", "innodb_flush_neighbors", "innodb_read_io_threads",
    "innodb_write_io_threads", "innodb_purge_threads", "innodb_lru_scan_depth", "innodb_old_blocks_pct",
    "innodb_old_blocks_time", "innodb_random_read_ahead", "innodb_read_ahead_threshold", "innodb_sync_spin_loops",
    "innodb_spin_wait_delay", "table_open_cache", "table_definition_cache", "thread_cache_size", "thread_handling",
    "sort_buffer_size", "join_buffer_size", "tmp_table_size", "max_heap_table_size", "read_buffer_size",
    "read_rnd_buffer_size", "query_cache_type", "query_cache_size",
]
# removed in 10.11, deprecated with no effect, without effect while the binlog is off, or no tuning knob
LEFT_OUT = ["innodb_buffer_pool_instances", "innodb_log_files_in_group", "innodb_buffer_pool_chunk_size",
            "innodb_change_buffering", "innodb_log_spin_wait_delay", "sync_binlog", "innodb_fast_shutdown"]
UNSAFE = {"innodb_flush_log_at_trx_commit": Safety.DURABILITY, "innodb_flush_method": Safety.DURABILITY,
          "innodb_doublewrite": Safety.DURABILITY}
BUILT_IN_NOT_IN_HELP = {"table_open_cache"}  # --help prints it cut to the open-files limit; DEFAULT_VALUE has it
# SYSTEM_VARIABLES.VARIABLE_TYPE for each of our types (enums: MariaDB's own, or a number with a few meanings)
SERVER_TYPES = {
    KnobType.BYTES: ("BIGINT UNSIGNED", "INT UNSIGNED"), KnobType.INT: ("BIGINT UNSIGNED", "INT UNSIGNED", "BIGINT"),
    KnobType.FLOAT: ("DOUBLE",), KnobType.BOOL: ("BOOLEAN",),
    KnobType.ENUM: ("ENUM", "BIGINT UNSIGNED", "BIGINT"),
}


@dataclass(frozen=True)
class Variable:
    """One row of information_schema.SYSTEM_VARIABLES on the scratch server."""

    value: str
    default: str
    type: str
    min: str | None
    max: str | None
    read_only: bool
    enum_values: tuple[str, ...]


@dataclass(frozen=True)
class Server:
    """The scratch server's variables, and a way to run SQL on it."""

    socket: Path
    variables: dict[str, Variable]

    def sql(self, statement: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLIENT, f"--socket={self.socket}", "-uroot", "--batch", "--skip-column-names",
                               "-e", statement], capture_output=True, text=True, timeout=30, check=False)


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *argv] if os.geteuid() == 0 else argv  # mariadbd refuses root


def _skip_unless_runnable() -> None:
    if not MARIADBD.exists():
        pytest.skip(f"MariaDB is not installed ({MARIADBD} is missing; apt-get install mariadb-server)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            pytest.skip(f"running as root and there is no '{SERVER_USER}' user to run MariaDB as")
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser is missing to run MariaDB as another user")


@pytest.fixture(scope="module")
def mariadb() -> Catalog:
    return load_catalog(CATALOG)


@pytest.fixture(scope="module")
def help_defaults() -> dict[str, str]:
    """The variables table of ``mariadbd --no-defaults --verbose --help``, names with underscores."""
    _skip_unless_runnable()
    done = subprocess.run(_as_server_user([str(MARIADBD), "--no-defaults", "--verbose", "--help"]),
                          capture_output=True, text=True, timeout=60, check=False, cwd="/")
    assert done.returncode == 0, f"mariadbd --verbose --help failed: {done.stderr}"
    _, marker, table = done.stdout.partition("\nVariables (--variable-name=value)")
    assert marker, "mariadbd --verbose --help printed no variables table"
    lines = table.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))  # under the column headers
    values = {}
    for line in lines[rule + 1:]:
        if not line.strip():
            break
        name, _, value = line.partition(" ")
        values[name.replace("-", "_")] = value.strip()
    return values


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A scratch server of the installed MariaDB, killed and removed at the end whatever happens."""
    _skip_unless_runnable()
    home = Path(tempfile.mkdtemp(prefix="knobtune-catalog-test-mariadb-"))
    socket = home / "sock"
    process: subprocess.Popen[bytes] | None = None
    try:
        process = _install_and_start(home, socket)
        yield Server(socket, _variables(Server(socket, {})))
    finally:
        if process is not None:
            _stop(process, socket)
        shutil.rmtree(home, ignore_errors=True)


def _install_and_start(home: Path, socket: Path) -> subprocess.Popen[bytes]:
    """A new data directory in ``home`` and a server on it that answers on ``socket`` (no TCP port)."""
    data, tmpdir = home / "data", home / "tmp"  # a private tmpdir: no sweep of /tmp can take its files
    tmpdir.mkdir()
    for folder in (home, tmpdir):
        folder.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(folder, SERVER_USER, SERVER_USER)
    installed = subprocess.run(
        _as_server_user([INSTALL_DB, "--no-defaults", f"--datadir={data}", f"--tmpdir={tmpdir}",
                         "--auth-root-authentication-method=normal", "--skip-test-db"]),
        capture_output=True, text=True, timeout=120, check=False)
    assert installed.returncode == 0, f"mariadb-install-db failed: {installed.stdout}{installed.stderr}"
    log = home / "error.log"
    process = subprocess.Popen(
        _as_server_user([str(MARIADBD), "--no-defaults", f"--datadir={data}", f"--tmpdir={tmpdir}",
                         f"--socket={socket}", "--skip-networking", f"--pid-file={home / 'pid'}",
                         f"--log-error={log}"]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while Server(socket, {}).sql("SELECT 1").returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mariadbd exited or did not answer within {START_TIMEOUT_S:.0f} s: "
                            f"{log.read_text() if log.exists() else 'no error log'}")
            time.sleep(0.2)
    except BaseException:  # a failed start or Ctrl-C: the caller never gets the process to stop
        _stop(process, socket)
        raise
    return process


def _variables(scratch: Server) -> dict[str, Variable]:
    rows = scratch.sql("SELECT LOWER(VARIABLE_NAME), GLOBAL_VALUE, DEFAULT_VALUE, VARIABLE_TYPE, NUMERIC_MIN_VALUE, "
                       "NUMERIC_MAX_VALUE, READ_ONLY, ENUM_VALUE_LIST FROM information_schema.SYSTEM_VARIABLES")
    assert rows.returncode == 0, rows.stderr
    variables = {}
    for line in rows.stdout.splitlines():
        name, value, default, var_type, low, high, read_only, enum_values = line.split("\t")
        variables[name] = Variable(value, default, var_type, None if low == "NULL" else low,
                                   None if high == "NULL" else high, read_only == "YES",
                                   () if enum_values == "NULL" else tuple(enum_values.split(",")))
    return variables


def _stop(process: subprocess.Popen[bytes], socket: Path) -> None:
    """Shut the server down cleanly, else kill its process group (runuser and mariadbd)."""
    try:
        subprocess.run(["mariadb-admin", f"--socket={socket}", "-uroot", "shutdown"],
                       capture_output=True, timeout=30, check=False)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def to_ours(knob: Knob, raw: str) -> Value:
    """A value as --help or SYSTEM_VARIABLES prints it, in the catalog's type."""
    if knob.type is KnobType.BOOL:
        assert raw.upper() in ("ON", "OFF", "TRUE", "FALSE"), f"{knob.name}: {raw!r} is not a boolean"
        return raw.upper() in ("ON", "TRUE")
    if knob.type is KnobType.ENUM:
        return raw
    if knob.type is KnobType.FLOAT:
        return float(raw)
    return int(raw)


def test_catalog_loads_and_holds_the_chosen_settings(mariadb) -> None:
    assert (mariadb.system, mariadb.version, mariadb.formats) == ("mariadb", "10.11", ("my-cnf",))
    assert len(mariadb.knobs) >= 30
    assert [name for name in REQUIRED if name not in mariadb.knobs] == []
    assert [name for name in LEFT_OUT if name in mariadb.knobs] == []
    assert all(knob.description for knob in mariadb.knobs.values())
    assert all(knob.names["my-cnf"] == name for name, knob in mariadb.knobs.items())


def test_every_knob_is_a_variable_with_its_type_and_restart_flag(mariadb, server) -> None:
    for knob in mariadb.knobs.values():
        assert knob.name in server.variables, f"{knob.name} is not a MariaDB 10.11 system variable"
        variable = server.variables[knob.name]
        assert variable.type in SERVER_TYPES[knob.type], \
            f"{knob.name}: MariaDB's type is {variable.type}, the catalog's {knob.type}"
        assert knob.restart == variable.read_only, \
            f"{knob.name}: READ_ONLY is {variable.read_only}, but the catalog says restart = {knob.restart}"


def test_defaults_are_what_mariadbd_help_prints(mariadb, help_defaults) -> None:
    for knob in mariadb.knobs.values():
        assert knob.name in help_defaults, f"{knob.name} is not in mariadbd --verbose --help's table"
        printed = to_ours(knob, help_defaults[knob.name])
        if knob.name in BUILT_IN_NOT_IN_HELP:
            assert printed <= knob.default, f"{knob.name}: --help prints {printed}, above the built-in {knob.default}"
            continue
        assert printed == knob.default, f"{knob.name}: --help prints {printed!r}, the catalog says {knob.default!r}"


def test_what_help_cannot_tell_agrees_with_a_running_server(mariadb, server) -> None:
    for name in BUILT_IN_NOT_IN_HELP:
        knob = mariadb.knobs[name]
        assert to_ours(knob, server.variables[name].default) == knob.default, f"{name}: DEFAULT_VALUE differs"
    # --help's 4294967295 is MariaDB's "auto" marker; a running server turns it into the special's meaning
    capacity_max = mariadb.knobs["innodb_io_capacity_max"]
    assert capacity_max.default in capacity_max.special
    derived = max(2 * int(mariadb.knobs["innodb_io_capacity"].default), 2000)
    assert int(server.variables["innodb_io_capacity_max"].value) == derived
    # thread_cache_size: the built-in 256 capped at max_connections, as --help says
    assert int(server.variables["thread_cache_size"].value) == mariadb.knobs["thread_cache_size"].default
    assert int(server.variables["thread_cache_size"].default) > mariadb.knobs["thread_cache_size"].max


def test_ranges_and_special_values_lie_within_mariadbs_limits(mariadb, server) -> None:
    for knob in (k for k in mariadb.knobs.values() if k.is_numeric):
        variable = server.variables[knob.name]
        low, high = float(variable.min), float(variable.max)
        for value in (knob.min, knob.max, *knob.special):
            assert low <= value <= high, f"{knob.name}: {value} is outside MariaDB's limits [{low:g}, {high:g}]"


def test_the_server_keeps_every_bound_it_is_set_to(mariadb, server) -> None:
    """Each bound and special value of a runtime setting, set with SET GLOBAL, reads back unchanged: a value the
    server takes as it is (not cut to a limit or a block size). Sizes that would allocate or write gigabytes are
    left to the limits test."""
    heavy = {"innodb_buffer_pool_size", "innodb_log_file_size", "query_cache_size", "key_buffer_size"}
    expected, script = {}, []
    for knob in (k for k in mariadb.knobs.values() if k.is_numeric and not k.restart and k.name not in heavy):
        for value in (knob.min, knob.max, *knob.special, knob.default):  # the default last
            literal = f"{value:g}" if knob.type is KnobType.FLOAT else str(int(value))
            expected[(knob.name, literal)] = value
            script.append(f"SET GLOBAL {knob.name} = {literal}; "
                          f"SELECT '{knob.name}', '{literal}', @@GLOBAL.{knob.name};")
    script.append("SET GLOBAL innodb_io_capacity = 200;")  # moved to 100 by innodb_io_capacity_max = 100
    done = server.sql("\n".join(script))  # one client for all of them
    assert done.returncode == 0, f"a bound is refused: {done.stderr.strip()}"
    read_back = {(name, literal): raw for name, literal, raw in (line.split("\t") for line in done.stdout.splitlines())}
    assert set(read_back) == set(expected)
    for (name, literal), value in expected.items():
        assert to_ours(mariadb.knobs[name], read_back[name, literal]) == pytest.approx(value), \
            f"{name} = {literal} reads back as {read_back[name, literal]}"


def test_every_enum_choice_is_one_mariadb_takes(mariadb, server) -> None:
    for knob in (k for k in mariadb.knobs.values() if k.type is KnobType.ENUM):
        variable = server.variables[knob.name]
        if variable.type == "ENUM":
            assert set(knob.choices) <= set(variable.enum_values), f"{knob.name}: MariaDB takes {variable.enum_values}"
        else:  # a number whose values each mean something
            assert all(float(variable.min) <= int(c) <= float(variable.max) for c in knob.choices), knob.name
        if knob.restart:
            continue  # read-only: only a restart could try the choices
        for choice in (*knob.choices, knob.default):  # the default last, so the server ends as it began
            literal = f"'{choice}'" if variable.type == "ENUM" else choice  # a number is refused as a string
            done = server.sql(f"SET GLOBAL {knob.name} = {literal}; SELECT @@GLOBAL.{knob.name}")
            assert done.returncode == 0, f"{knob.name} = {choice} is refused: {done.stderr.strip()}"
            assert done.stdout.strip() == choice, f"{knob.name} = {choice} reads back as {done.stdout.strip()}"


def test_unsafe_settings_stay_out_of_the_default_search(mariadb) -> None:
    space = build_space(mariadb)
    assert dict(space.left_out) == UNSAFE
    assert "innodb_doublewrite" not in space.knobs
    assert not {"key_buffer_size", "aria_pagecache_buffer_size"} & set(space.knobs)  # known, not searched
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    for _ in range(60):
        trial = study.ask()
        config, _ = space.suggest(trial)
        study.tell(trial, 1.0)
        assert config["innodb_doublewrite"] is True
        assert config["innodb_flush_log_at_trx_commit"] in ("1", "3")
        assert config["innodb_flush_method"] not in ("littlesync", "nosync")
        assert config["innodb_io_capacity_max"] >= config["innodb_io_capacity"]
        assert config["innodb_max_dirty_pages_pct_lwm"] <= config["innodb_max_dirty_pages_pct"]
        assert config["innodb_log_file_size"] >= config["innodb_log_buffer_size"]
        mariadb.config(mariadb.changed(config))  # every sample is a valid config
    unsafe = build_space(mariadb, allow_unsafe=True)
    assert unsafe.left_out == {} and set(UNSAFE) <= set(unsafe.knobs)


def test_unsafe_values_are_specific(mariadb) -> None:
    commit = mariadb.knobs["innodb_flush_log_at_trx_commit"]
    assert commit.is_unsafe("0") and commit.is_unsafe("2") and not commit.is_unsafe("1") and not commit.is_unsafe("3")
    method = mariadb.knobs["innodb_flush_method"]
    assert method.is_unsafe("nosync") and method.is_unsafe("littlesync")
    assert not any(method.is_unsafe(v) for v in ("fsync", "O_DSYNC", "O_DIRECT", "O_DIRECT_NO_FSYNC"))
    assert mariadb.knobs["innodb_doublewrite"].is_unsafe(False)
    assert not mariadb.knobs["innodb_doublewrite"].is_unsafe(True)


def test_memory_model_at_the_defaults(mariadb) -> None:
    # buffer pool 128 MiB + log buffer 16 MiB + key cache 128 MiB + Aria page cache 128 MiB + query cache 1 MiB
    assert mariadb.memory.planned_bytes(mariadb.defaults()) == (128 + 16 + 128 + 128 + 1) * 2**20
    assert mariadb.memory.write_buffer_bytes(mariadb.defaults()) == 16 * 2**20
