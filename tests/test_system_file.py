"""Systems described as data: the system file's checks (a corpus of broken files), and the shipped MariaDB file
run for real at a small size, from where it ships and as a user's copy outside the repository."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from knobtune.errors import CatalogError, WorkloadError
from knobtune.knobs import load_catalog
from knobtune.systems import SYSTEMS, make_target, use_system_file
from knobtune.systems import SHIPPED_FILES
from knobtune.described.system_file import fill, load_system_file
from knobtune.workloads import load_workload

SHIPPED = SHIPPED_FILES / "mariadb" / "system.toml"


def _copy_system(tmp_path: Path, name: str = "mymaria") -> Path:
    """The shipped MariaDB file and its data files copied outside the repository, under another system name."""
    folder = tmp_path / "elsewhere"
    shutil.copytree(SHIPPED.parent, folder)
    for file in ("system.toml", "catalog.toml"):
        text = (folder / file).read_text()
        (folder / file).write_text(re.sub(r'^(name|system) = "mariadb"', rf'\1 = "{name}"', text, flags=re.M))
    return folder / "system.toml"


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    path = _copy_system(tmp_path)
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


INIT_ARGV = ('argv = ["/usr/bin/mariadb-install-db", "--no-defaults", "--datadir={data}", '
             '"--auth-root-authentication-method=normal",\n        "--skip-test-db"]')
SCHEMA = [  # a misspelt field and a wrong type at every depth: the schema's one line (what replaces what, the line)
    ('default_driver = "sysbench"', 'defualt_driver = "sysbench"',
     r"unknown field 'defualt_driver' \(did you mean 'default_driver'\?\)"),
    ('ready_limit_s = 300', 'ready_limit_s = "long"', r"ready_limit_s 'long' is not a number. Fix: e.g. ready_limit_s"),
    ('stop_limit_s = 120', 'stop_limit_s = 0', r"stop_limit_s 0 is not a positive number"),
    ('"/usr/bin/sysbench"]', '"sysbench"]', r"tools 'sysbench' is not an absolute path"),
    ('user = "mysql"', 'user = ""', r"user '' is not a user name. Fix: e.g. user = \"dbuser\""),
    ("[ready]\nargv", "[ready]\nargs", r"unknown field 'ready.args' \(did you mean 'argv'\?\)"),
    ('format = "my-cnf"\n\n[ready]', 'format = 1\n\n[ready]', r"config.format 1 is not text"),
    ("wait = { sql", "wiat = { sql", r"unknown field 'settle.wiat' \(did you mean 'wait'\?\)"),
    ('equals = "0", poll_s', 'equal = "0", poll_s', r"unknown field 'settle.wait.equal' \(did you mean 'equals'\?\)"),
    ('poll_s = 0.2 }', 'poll_s = "fast" }', r"settle.wait.poll_s 'fast' is not a number. Fix: e.g. poll_s = 0.2"),
    ('poll_s = 0.2 }', 'poll_s = 60 }', r"settle.wait.poll_s 60 is above 10"),
    ('[read_counters.names]\n', '[read_counters.names]\nlog_flushes = 12\n',
     r"read_counters.names.log_flushes 12 is not text"),
    ('levels = ["pages_dirty_at_end"', 'level = ["pages_dirty_at_end"',
     r"unknown field 'read_counters.level' \(did you mean 'levels'\?\)"),
    ('count = "SELECT COUNT(*)', 'cuont = "SELECT COUNT(*)',
     r"unknown field 'durability.cuont' \(did you mean 'count'\?\)"),
    ('setup = ["CREATE TABLE', 'setup = [1, "CREATE TABLE',
     r"durability.setup \[1, .* is not a list of SQL statements"),
    ('connection = ["--db-driver=mysql"', 'conection = ["--db-driver=mysql"',
     r"unknown field 'drivers.sysbench.conection' \(did you mean 'connection'\?\)"),
    ('connection = ["--db-driver=mysql", "--mysql-socket={socket}", "--mysql-user=root", "--mysql-db=sbtest"]',
     'connection = []', r"drivers.sysbench.connection is an empty list"),
    ('header = ["[mysqld]"]', 'headr = ["[mysqld]"]', r"unknown field 'formats #1.headr' \(did you mean 'header'\?\)"),
    ('booleans = ["ON", "OFF"]', 'booleans = true', r"formats #1.booleans True is not a list of lines"),
    ('label = "mariadb-kb-memory', 'lable = "mariadb-kb-memory',
     r"unknown field 'known #1.lable' \(did you mean 'label'\?\)"),
    ('values = { innodb_buffer_pool_size = "0.65 * memory_bytes" }', 'values = "0.65 * memory_bytes"',
     r"known #1.values is not a table"),
    ('[paths]\nsocket = "{home}/mariadb.sock"', '[paths]\nsocket = ["{home}/mariadb.sock"]',
     r"paths.socket \[.* is not text"),
    ("wait = { sql = \"SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = "
     "'INNODB_BUFFER_POOL_PAGES_DIRTY'\", equals = \"0\", poll_s = 0.2 }", "wait = 3",
     r"settle.wait is not a table. Fix: write it as a table of its fields \(sql, equals, poll_s\)"),
]


@pytest.mark.parametrize(("old", "new", "message"), SCHEMA, ids=[re.sub(r"\W+", "-", m)[:40] for _, _, m in SCHEMA])
def test_a_misspelt_field_or_a_wrong_type_at_any_depth_gets_the_schemas_one_line(tmp_path, old, new, message) -> None:
    with pytest.raises(CatalogError) as caught:
        load_system_file(_broken(tmp_path, old, new))
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text) and text.startswith(str(tmp_path)), text
    assert "Fix: " in text


BROKEN = [  # (what is replaced, by what, what the one-line error must say)
    ('name = "mymaria"', 'name = "My Maria"', r"name 'My Maria' is not a plain lower-case name"),
    ('catalog = "catalog.toml"', 'catalog = "nosuch.toml"', r"catalog: .*nosuch.toml does not exist"),
    (INIT_ARGV, 'argv = "mariadb-install-db"', r"init.argv 'mariadb-install-db' is not a list of texts, the program"),
    ('"--datadir={data}", "--auth', '"--datadir={nosuch}", "--auth',
     r"\[init\] argv: names unknown placeholder \{nosuch\}"),
    ('format = "my-cnf"\n\n[ready]', 'format = "ini"\n\n[ready]', r"\[config\] format: 'ini' is not one of the file's"),
    ('format = "my-cnf"\n\n[ready]', 'flag = "--{name}={value}"\n\n[ready]', r'\[start\] argv: does not place the'),
    ('"--execute", "{sql}"]', '"--execute"]', r"\[sql\] argv: must have the statement as one whole element"),
    ('pattern = "Ver (\\\\S+)"', 'pattern = "Ver \\\\S+"', r"\[version\] pattern: has no group"),
    ('clean_stop = "SIGTERM"', 'clean_stop = "SIGHUP"', r"clean_stop 'SIGHUP' is not a signal.*use one of SIGTERM"),
    ('commit = "INSERT INTO sbtest.knobtune_ledger VALUES ({n})"', 'commit = "INSERT INTO t VALUES (1)"',
     r"\[durability\] commit: must name \{n\}"),
    ('values = { innodb_buffer_pool_size', 'values = { nosuch_knob',
     r"\[\[known\]\] #1 values: 'nosuch_knob' is not a knob"),
    ('default_driver = "sysbench"', 'default_driver = "hammerdb"',
     r"default_driver: 'hammerdb' has no \[drivers.hammerdb\]"),
    ('user = "mysql"', 'user = "mysql"\nport = 3306', r"unknown field 'port'. Fix: remove it, or use one of name"),
    ('levels = ["pages_dirty_at_end"', 'levels = ["nosuch"', r"\[read_counters\] levels: must list names"),
]


@pytest.mark.parametrize(("old", "new", "message"), BROKEN, ids=[m.split(":")[0] for _, _, m in BROKEN])
def test_a_broken_system_file_gets_one_line_naming_the_field_and_the_fix(tmp_path, old, new, message) -> None:
    with pytest.raises(CatalogError) as caught:
        load_system_file(_broken(tmp_path, old, new))
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text), text
    assert "Fix: " in text


def test_the_shipped_file_loads_and_names_no_system_in_code() -> None:
    files = load_system_file(SHIPPED)
    assert files.name == "mariadb" and "sysbench" in files.drivers and files.user == "mysql"
    assert "--skip-networking" in files.start  # a Unix socket only
    assert SYSTEMS["mariadb"].formats[0].name == "my-cnf"
    package = Path(__file__).resolve().parents[1] / "knobtune"
    named = [str(p) for p in package.rglob("*.py") if re.search(r"mariadb|mysql", p.read_text(), re.I)]
    assert named == []  # the system is data only


def test_placeholders_fill_parts_of_elements_or_stand_for_lists_never_split() -> None:
    argv = fill(["prog", "{connection}", "--sock={socket}", "{value}"],
                {"connection": ["--a=1", "--b=2"], "socket": "/tmp/x y", "value": "1; rm -rf /"})
    assert argv == ["prog", "--a=1", "--b=2", "--sock=/tmp/x y", "1; rm -rf /"]


def test_a_workload_section_is_checked_with_one_line(tmp_path) -> None:
    catalog = load_catalog("mariadb")
    workload = load_workload("oltp_read_write")
    section = dict(workload.drivers["sysbench"])
    for key, value, message in (("run", "sysbench run", "run 'sysbench run' is not a list of texts"),
                                ("run", ["sysbench", "{nosuch}"], "names unknown placeholder {nosuch}"),
                                ("operations", "transactions", "operations must be a pattern with one group"),
                                ("clients", 0, "clients 0 is below 1. Fix: e.g. clients = 8"),
                                ("check", {"sql": "SELECT 1", "expect": ["tables * nosuch"]}, "cannot be computed")):
        broken = dataclasses.replace(workload, drivers={"sysbench": {**section, key: value}})
        with pytest.raises(WorkloadError, match=re.escape(message)) as caught:
            make_target(catalog, broken, tmp_path / "scratch")
        assert "\n" not in str(caught.value) and "Fix: " in str(caught.value)


def _small(name: str, events: int = 400):
    """A shipped sysbench workload at a test's size: 8 small tables, 4 clients, ``events`` transactions."""
    workload = load_workload(name).scaled(events)
    section = {**workload.drivers["sysbench"], "table_size": 2000, "clients": 4}
    return dataclasses.replace(workload, drivers={"sysbench": section})


def _servers(home: str = f"knobtune-mariadb-{os.getpid()}-") -> set[int]:
    """The servers started for these tests: their homes are named knobtune-SYSTEM-PID-... (this process's, or the
    knobtune process a test started), so a study running beside the tests is not counted."""
    out = subprocess.run(["pgrep", "-f", f"mariadbd.*{home}"], capture_output=True, text=True, check=False).stdout
    return {int(p) for p in out.split()}


@pytest.mark.slow
def test_a_run_checks_the_data_settles_and_a_lossy_config_fails_the_crash_check(tmp_path) -> None:
    """One real run under the default: the rows and id sums hold after the crash and recovery, the settle flushed
    what the run left dirty, the counters are read; the crash check passes for the default and catches
    innodb_flush_log_at_trx_commit = 0 losing acknowledged commits; no server is left."""
    before = _servers()
    catalog = load_catalog("mariadb")
    workload = _small("oltp_read_write")
    with make_target(catalog, workload, tmp_path / "scratch") as target:
        measurement = target.run(catalog.defaults(), workload.rungs[-1], timeout_s=120, log_path=tmp_path / "run.log",
                                 seed=1)
        assert measurement.verified and measurement.phases[0].ops == workload.rungs[-1].records
        assert measurement.settle is not None and measurement.settle.recovery_s > 0
        assert measurement.peak_rss_bytes and measurement.peak_rss_bytes > 50 << 20
        assert measurement.counters["questions"] > workload.rungs[-1].records * 10
        assert measurement.counters["pages_dirty_at_end"] >= 0
        assert target.crash_check(catalog.defaults(), tmp_path / "crash-default") is None
        lossy = target.crash_check(catalog.config({"innodb_flush_log_at_trx_commit": "0"}), tmp_path / "crash-lossy")
        assert lossy is None or "acknowledged commits" in lossy  # a kill loses up to a second: usually some
    assert _servers() <= before


@pytest.mark.slow
def test_a_config_the_server_refuses_is_refused_with_its_own_message(tmp_path) -> None:
    from knobtune.targets import FailureKind, RunFailure

    catalog = load_catalog("mariadb")
    workload = _small("oltp_point_select")
    with make_target(catalog, workload, tmp_path / "scratch") as target:
        target.files = dataclasses.replace(target.files, start=(*target.files.start, "--innodb-nosuch-option=1"))
        with pytest.raises(RunFailure) as caught:
            target.run(catalog.config({"innodb_buffer_pool_size": 256 << 20}), workload.rungs[0], timeout_s=60,
                       log_path=tmp_path / "run.log", seed=1)
        assert caught.value.kind is FailureKind.REFUSED and "nosuch" in caught.value.reason


@pytest.mark.slow
def test_a_users_system_file_outside_the_repository_tunes_like_a_shipped_one(tmp_path) -> None:
    """`knobtune tune path/to/system.toml` runs a real (tiny) study; `show` finds the system again from the
    path the study recorded; no server is left."""
    system = _copy_system(tmp_path)
    workload_file = tmp_path / "tiny.toml"
    text = (Path(load_workload("oltp_point_select").source)).read_text()  # type: ignore[arg-type]
    text = re.sub(r"^systems = .*$", 'systems = ["mymaria"]', text, flags=re.M).replace("table_size = 250000",
                                                                                      "table_size = 2000")
    workload_file.write_text(re.sub(r"^records = \d+", "records = 600", text, flags=re.M))
    home = tmp_path / "studies"
    tune = subprocess.Popen([sys.executable, "-m", "knobtune.cli", "tune", str(system), "--workload",
                             str(workload_file), "--trials", "2", "--verify-top", "0", "--dir", str(home), "--study",
                             "u"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = tune.communicate(timeout=600)
    assert tune.returncode == 0, out[-2000:] + err[-2000:]
    assert "mymaria" in out
    shown = subprocess.run([sys.executable, "-m", "knobtune.cli", "show", "u", "--dir", str(home)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0 and "mymaria" in shown.stdout, shown.stdout + shown.stderr
    assert _servers(f"knobtune-mymaria-{tune.pid}-") == set()  # its own servers: another run's are not counted


def test_a_user_file_cannot_take_a_shipped_systems_name(tmp_path) -> None:
    from knobtune.errors import UsageError

    with pytest.raises(UsageError, match="runs as a package of its own"):
        use_system_file(_copy_system(tmp_path, name="postgresql"))
