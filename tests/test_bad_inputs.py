"""A corpus of bad inputs across every command and file format, run in-process as users run ``knobtune``.

Each must end in exactly one line on stderr (``error: ... Fix: ...``), exit status 2, no traceback, and nothing
created: no study, no file (in the studies folder, the working folder or the temporary folder), no process.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from knobtune.cli import run
from knobtune.knobs import catalog as catalogs
from knobtune.systems import _registry as registry
from knobtune.storage import open_store

from conftest import CORPUS

SYSTEM_FILES = Path(__file__).parent.parent / "knobtune" / "systems"

DB_BENCH = '''name = "tiny"
systems = ["rocksdb", "leveldb"]
records = 2000
ladder = [0.5, 1.0]
[drivers.db_bench]
benchmarks = ["fillrandom", "readrandom"]
[drivers.kvbench]
phases = [{ name = "load", kind = "fill", order = "shuffled" }, { name = "get", kind = "read", order = "random" }]
'''
MIX = '''name = "tinymix"
systems = ["leveldb"]
records = 2000
operations = 2000
ladder = [0.5, 1.0]
[drivers.kvbench]
phases = [{ name = "load", kind = "fill" }, { name = "run", kind = "mix", mix = { read = 0.5, update = 0.5 } }]
measure = ["run"]
'''
WORKLOADS = {  # file name -> (what replaces what in DB_BENCH or MIX, the error's words)
    "misspelt-top.toml": (DB_BENCH, "records = 2000", "recrods = 2000", "field 'recrods'.*did you mean 'records'"),
    "mix-not-one.toml": (MIX, "read = 0.5, update = 0.5", "read = 0.9, update = 0.5", "add up to 1.4, not 1"),
    "mix-unknown-op.toml": (MIX, "update = 0.5", "upsert = 0.5", "mix.upsert'.*not an operation"),
    "mix-count.toml": (MIX, 'kind = "mix",', 'kind = "mix", count = 5,', "sets a mix phase's count itself"),
    "phases-empty.toml": (MIX, 'phases = [{ name = "load", kind = "fill" }, { name = "run", kind = "mix", mix = '
                               '{ read = 0.5, update = 0.5 } }]', "phases = []", "not a non-empty list of phases"),
    "kind-explode.toml": (DB_BENCH, 'kind = "read"', 'kind = "explode"', "'explode' is not one of fill, read"),
    "order-bad.toml": (DB_BENCH, 'order = "random"', 'order = "randm"', "did you mean 'random'"),
    "phase-field.toml": (DB_BENCH, 'kind = "read",', 'kind = "read", expct = "all",', "field of a phase.*'expect'"),
    "measure-bad.toml": (MIX, 'measure = ["run"]', 'measure = ["rn"]', "'rn' is not a phase"),
    "kvbench-field.toml": (DB_BENCH, "[drivers.kvbench]\n", "[drivers.kvbench]\nthread = 4\n",
                           "did you mean 'threads'"),
    "bench-unknown.toml": (DB_BENCH, '"readrandom"]', '"readrandon"]', "'readrandon' is not a db_bench benchmark"),
    "bench-field.toml": (DB_BENCH, "[drivers.db_bench]\n", "[drivers.db_bench]\nmeasur = []\n",
                         "did you mean 'measure'"),
    "bench-measure.toml": (DB_BENCH, "[drivers.db_bench]\n", '[drivers.db_bench]\nmeasure = ["nope"]\n',
                           "'nope' is not one"),
    "bench-flag.toml": (DB_BENCH, "[drivers.db_bench]\n", "[drivers.db_bench]\nflags = { nosuch = 1 }\n",
                        "not a db_bench workload flag"),
    "name-path.toml": (DB_BENCH, 'name = "tiny"', 'name = "../../tiny"', "field 'name'.*path separator"),
    "ladder-text.toml": (DB_BENCH, "ladder = [0.5, 1.0]", 'ladder = "abc"', "not a list of fractions"),
    "key-small.toml": (DB_BENCH, "records = 2000", "records = 2000\nkey_size = 4", "below 8 bytes"),
    "systems-text.toml": (DB_BENCH, 'systems = ["rocksdb", "leveldb"]', 'systems = "rocksdb"', "not a list of systems"),
}
CONFIGS = {  # file name -> (JSON text, the error's words)
    "unknown-knob.json": ('{"nosuch_knob": 1}', "nosuch_knob"),
    "bad-enum.json": ('{"compaction_style": "sideways"}', "compaction_style"),
    "out-of-range.json": ('{"max_background_jobs": -5}', "max_background_jobs"),
    "not-json.json": ("{nope", "json"),
}

def _expected(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# expect: ")


T = ("tune", "rocksdb", "--workload", "fillrandom", "--trials", "1")
L = ("tune", "leveldb", "--workload", "fillrandom", "--trials", "1")
C = ("compare", "rocksdb", "--workload", "fillrandom")
S = ("sweep", "rocksdb", "--workload", "fillrandom")
CASES: list[tuple[str, tuple[str, ...], str]] = [  # (id, the arguments, a pattern of the one line)
    ("study-escape", (*T, "--study", "../../escape"), "path separator"),
    ("study-empty", (*T, "--study", ""), "--study '' is empty"),
    ("study-slash", (*T, "--study", "a/b"), "path separator"),
    ("study-long", (*T, "--study", "x" * 65), "more than 64"),
    ("study-space", (*T, "--study", "my study"), "character outside"),
    ("study-dot", (*T, "--study", ".hidden"), "character outside"),
    ("study-dots", (*T, "--study", "a..b"), "holds '..'"),
    ("seed-negative", (*T, "--seed", "-1"), "--seed -1 is below 0"),
    ("seed-huge", (*T, "--seed", "99999999999"), "--seed 99999999999 is above 4294967295"),
    ("seed-text", (*T, "--seed", "abc"), "Invalid value for '--seed'"),
    ("records-tiny", (*T, "--records", "10"), "--records 10 is below 500"),
    ("records-negative", (*T, "--records", "-5"), "--records -5 is below 1"),
    ("records-huge", (*T, "--records", "99999999999999"), "not enough free space"),
    ("knobs-empty", (*T, "--knobs", ""), "empty name"),
    ("knobs-twice", (*T, "--knobs", "write_buffer_size,write_buffer_size"), "twice"),
    ("knobs-trailing-comma", (*T, "--knobs", "write_buffer_size,"), "empty name"),
    ("knobs-unknown", (*T, "--knobs", "nosuch_knob"), "unknown knob 'nosuch_knob'"),
    ("time-huge", ("tune", "rocksdb", "--workload", "fillrandom", "--time", "100000h"), "longer than 30 days"),
    ("time-zero", ("tune", "rocksdb", "--workload", "fillrandom", "--time", "0s"), "not a positive duration"),
    ("time-text", ("tune", "rocksdb", "--workload", "fillrandom", "--time", "soon"), "--time"),
    ("repeats-zero", (*T, "--repeats", "0"), "--repeats 0 is below 2"),
    ("max-rounds-below-repeats", (*T, "--repeats", "5", "--max-rounds", "3"), "--max-rounds 3 is below --repeats 5"),
    ("production-holds-nothing", (*T, "--production-data", "1GiB", "--production-memory", "64GiB"), "holds all"),
    ("production-half", (*T, "--production-data", "1GiB"), "needs --production-memory"),
    ("memory-tiny-kvbench", (*L, "--memory-limit", "1KiB"), "below 4.0 MiB"),
    ("memory-text", (*T, "--memory-limit", "lots"), "not a size"),
    ("sampler", (*T, "--sampler", "nosuch"), "is not a sampler"),
    ("objective", (*T, "--objective", "fastest"), "not an objective"),
    ("trials-zero", ("tune", "rocksdb", "--workload", "fillrandom", "--trials", "0"), "--trials 0 is below 1"),
    ("no-budget", ("tune", "rocksdb", "--workload", "fillrandom"), "no budget given"),
    ("ranking-alone", (*T, "--ranking", "r"), "go together"),
    ("ranking-unknown", (*T, "--ranking", "nosuch", "--top-k", "3"), "no study 'nosuch'"),
    ("start-from-unknown", (*T, "--start-from", "nosuch"), "no study 'nosuch'"),
    ("timeout-nan", (*T, "--timeout-factor", "nan"), "not a finite number"),
    ("reduction-one", (*T, "--reduction-factor", "1"), "is below 2"),
    ("driver-unknown", (*T, "--driver", "nosuch"), "no target runs rocksdb through driver 'nosuch'"),
    ("system-unknown", ("tune", "nosuchdb", "--workload", "fillrandom", "--trials", "1"), "no knob catalog"),
    ("workload-unknown", ("tune", "rocksdb", "--workload", "nosuch", "--trials", "1"), "unknown workload"),
    ("workload-other-system", ("tune", "postgresql", "--workload", "fillrandom", "--trials", "1"), "not postgresql"),
    ("storage-bogus", (*T, "--storage", "bogus://x"), "cannot open storage"),
    ("option-unknown", (*T, "--nosuch", "1"), "No such option"),
    ("system-file-missing", ("tune", "nosuch.toml", "--workload", "fillrandom", "--trials", "1"), "no system file"),
    ("system-file-tool", ("tune", "{files}/mymaria/system.toml", "--workload", "{files}/maria.toml", "--trials", "1"),
     "is not installed"),
    ("catalog-unknown-field", ("knobs", str(CORPUS / "catalogs" / "bad-unknown-field.toml")), "Fix: "),
    ("catalog-misspelt-top", ("knobs", "{files}/catalog.toml"), "'verison'.*did you mean 'version'"),
    ("system-file-misspelt-top", ("knobs", "{files}/mymaria/misspelt.toml"), "did you mean 'clean_stop'"),
    ("catalog-bad-type", ("knobs", str(CORPUS / "catalogs" / "bad-type.toml")), "Fix: "),
    ("catalog-bad-toml", ("knobs", str(CORPUS / "catalogs" / "bad-toml.toml")), "Fix: "),
    ("workload-syntax", ("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-syntax.toml"), "--trials",
                         "1"), "Fix: "),
    ("workload-ladder-end", ("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-ladder-end.toml"),
                             "--trials", "1"), "ladder"),
    ("workload-objective", ("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-objective.toml"),
                            "--trials", "1"), "objective"),
    ("workload-missing-file", ("tune", "rocksdb", "--workload", "{files}/nosuch.toml", "--trials", "1"), "Fix: "),
    ("rank-samples", ("rank", "rocksdb", "--workload", "fillrandom", "--samples", "3"), "--samples 3 is below 8"),
    ("rank-study-escape", ("rank", "rocksdb", "--workload", "fillrandom", "--study", "../r"), "path separator"),
    ("rank-rung", ("rank", "rocksdb", "--workload", "fillrandom", "--rung", "9"), "has rungs 0-2"),
    ("rank-seed", ("rank", "rocksdb", "--workload", "fillrandom", "--seed", "-5"), "--seed -5 is below 0"),
    ("rank-from-unknown", ("rank", "rocksdb", "--workload", "fillrandom", "--from-study", "nosuch"), "no study"),
    ("worker-escape", ("worker", "--study", "../w"), "path separator"),
    ("show-escape", ("show", "../../etc"), "path separator"),
    ("show-unknown", ("show", "nosuch"), "no study 'nosuch'"),
    ("export-format", ("export", "old-release", "--format", "nosuch"), "nosuch"),
    ("export-to-folder", ("export", "old-release", "-o", "{files}"), "is a folder"),
    ("export-unwritable", ("export", "old-release", "-o", "/proc/nope/OPTIONS.ini"), "not a writable folder"),
    ("export-under-a-file", ("export", "old-release", "-o", "{files}/maria.toml/OPTIONS.ini"), "not a writable"),
    ("export-trial", ("export", "old-release", "--trial", "999"), "has no trial 999"),
    ("export-minimal-and-trial", ("export", "old-release", "--minimal", "--trial", "1"), "give one of them"),
    ("export-minimal-unexplained", ("export", "old-release", "--minimal"), "no minimal config"),
    ("report-unwritable", ("report", "old-release", "-o", "/proc/nope/r.html"), "not a writable folder"),
    ("report-unknown", ("report", "nosuch", "-o", "{files}/r.html"), "no study 'nosuch'"),
    ("explain-keep", ("explain", "old-release", "--keep", "2"), "not a share"),
    ("explain-repeats", ("explain", "old-release", "--repeats", "1"), "is below 2"),
    ("explain-unknown", ("explain", "nosuch"), "no study 'nosuch'"),
    ("compare-one", (*C, "--config", "default"), "at least two --config"),
    ("compare-unknown-knob", (*C, "--config", "default", "--config", "{files}/unknown-knob.json"), "nosuch_knob"),
    ("compare-bad-enum", (*C, "--config", "default", "--config", "{files}/bad-enum.json"), "compaction_style"),
    ("compare-out-of-range", (*C, "--config", "default", "--config", "{files}/out-of-range.json"), "max_background"),
    ("compare-not-json", (*C, "--config", "default", "--config", "{files}/not-json.json"), "Fix: "),
    ("compare-missing-file", (*C, "--config", "default", "--config", "{files}/none.json"), "Fix: "),
    ("compare-unknown-study", (*C, "--config", "default", "--config", "study:nosuch"), "no study 'nosuch'"),
    ("compare-escape-study", (*C, "--config", "default", "--config", "study:../x"), "path separator"),
    ("compare-repeats", (*C, "--config", "default", "--config", "default", "--repeats", "0"), "is below 1"),
    ("compare-seed", (*C, "--config", "default", "--config", "default", "--seed", "-1"), "is below 0"),
    ("compare-workload-other", ("compare", "postgresql", "--workload", "fillrandom", "--config", "default",
                                "--config", "default"), "not postgresql"),
    ("sweep-knob", (*S, "--knob", "nosuch_knob"), "nosuch_knob"),
    ("sweep-points", (*S, "--knob", "write_buffer_size", "--points", "1"), "is below 2"),
    ("sweep-to-folder", (*S, "--knob", "write_buffer_size", "-o", "{files}"), "is a folder"),
    ("sweep-around-escape", (*S, "--knob", "write_buffer_size", "--around", "../x"), "path separator"),
    ("diagnose-config", ("diagnose", "rocksdb", "--workload", "fillrandom", "--config", "{files}/none.json"), "Fix: "),
    ("diagnose-records", ("diagnose", "rocksdb", "--workload", "fillrandom", "--records", "3"), "below 500"),
    ("baseline-name", ("baseline", "rocksdb", "--name", "nosuch"), "nosuch"),
    ("baseline-profile", ("baseline", "postgresql", "--profile", "nosuch"), "nosuch"),
    ("baseline-to-folder", ("baseline", "rocksdb", "-o", "{files}"), "is a folder"),
    ("knobs-unknown-system", ("knobs", "nosuchdb"), "no knob catalog"),
    ("clean-option", ("clean", "--nosuch"), "No such option"),
    ("experiment-missing", ("tune", "--experiment", "{files}/nosuch.toml"), "cannot read the experiment"),
    ("experiment-option-over-file", ("tune", "--experiment", str(CORPUS / "experiments" / "good-minimal.toml"),
                                     "--seed", "-1"), "--seed -1 is below 0"),
    ("experiment-no-system", ("tune", "--workload", "fillrandom", "--trials", "1"), "no system"),
] + [(f"experiment-{path.stem}", ("tune", "--experiment", str(path)), re.escape(_expected(path)))
     for path in sorted((CORPUS / "experiments").glob("bad-*.toml"))
] + [(f"workload-{name.removesuffix('.toml')}", ("tune", "rocksdb" if "mix" not in text else "leveldb",
                                                  "--workload", f"{{files}}/{name}", "--trials", "1"), words)
     for name, (text, _, _, words) in WORKLOADS.items()]
KVBENCH_ONLY = {"workload-kind-explode", "workload-order-bad", "workload-phase-field", "workload-kvbench-field"}


@pytest.fixture(autouse=True)
def registries_as_they_were() -> Iterator[None]:
    """A case that names a system file makes its system known to this process; the next tests (in this process:
    the whole suite) must not see it."""
    saved = [(table, dict(table)) for table in (registry.SYSTEMS, registry.TARGETS, registry._USER_FILES,
                                                catalogs._DESCRIBED)]
    yield
    for table, before in saved:
        table.clear()
        table.update(before)


def test_the_corpus_is_large_and_every_case_named_once() -> None:
    assert len(CASES) >= 60 and len({case for case, _, _ in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A studies folder holding one finished study (old-release), and a folder of bad files."""
    root = tmp_path_factory.mktemp("bad")
    studies, files = root / "studies", root / "files"
    studies.mkdir()
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", studies / "studies.db")
    open_store(studies).storage()
    files.mkdir()
    for name, (base, old, new, _) in WORKLOADS.items():
        assert old in base, name
        (files / name).write_text(base.replace(old, new, 1))
    for name, (text, _) in CONFIGS.items():
        (files / name).write_text(text)
    maria = files / "mymaria"
    shutil.copytree(SYSTEM_FILES / "mariadb", maria)
    for file in ("system.toml", "catalog.toml"):
        text = (maria / file).read_text()
        text = re.sub(r'^(name|system) = "mariadb"', r'\1 = "mymaria"', text, flags=re.M)
        (maria / file).write_text(text.replace('"/usr/sbin/mariadbd"', '"/nonexistent/mariadbd"'))
    (maria / "misspelt.toml").write_text('clean_stopp = "SIGTERM"\n' + (maria / "system.toml").read_text())
    good = (CORPUS / "catalogs" / "good-minimal.toml").read_text()
    (files / "catalog.toml").write_text(good.replace('version = "1"', 'verison = "1"'))
    workload = (SYSTEM_FILES.parent / "workloads" / "data" / "oltp_read_write.toml").read_text()
    (files / "maria.toml").write_text(workload.replace('systems = ["mariadb", "postgresql"]', 'systems = ["mymaria"]'))
    work = root / "cwd"
    work.mkdir()
    return {"studies": studies, "files": files, "cwd": work, "root": root}


def _studies(folder: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(folder / "studies.db")) as db:
        return {name for (name,) in db.execute("SELECT study_name FROM studies")}


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


def _mine_in_tmp() -> set[str]:
    """Entries of the temporary folder that name this process (a server home is knobtune-...-<pid>-...)."""
    pid = str(os.getpid())
    return {entry for entry in os.listdir(tempfile.gettempdir()) if re.search(rf"(^|\D){pid}(\D|$)", entry)}


def _children() -> set[int]:
    children = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    children.add(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return children


@pytest.mark.parametrize(("args", "pattern"), [(args, pattern) for _, args, pattern in CASES],
                         ids=[case for case, _, _ in CASES])
def test_a_bad_input_is_one_line_status_2_and_creates_nothing(
        args: tuple[str, ...], pattern: str, folders: dict[str, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if request.node.callspec.id in KVBENCH_ONLY:  # the kvbench section of a file tune rocksdb reads through db_bench
        args = (*args, "--driver", "kvbench")
    argv = [arg.replace("{files}", str(folders["files"])) for arg in args]
    if argv[0] not in ("knobs", "baseline", "clean"):
        argv += ["--dir", str(folders["studies"])]
    monkeypatch.chdir(folders["cwd"])
    studies = _studies(folders["studies"])
    files, tmp, children = _files(folders["root"]), _mine_in_tmp(), _children()
    capsys.readouterr()

    status = run(argv)

    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix: " in lines[0], err
    assert "Traceback" not in err + out and not out.strip(), (out, err)
    assert re.search(pattern, lines[0]), lines[0]
    assert _studies(folders["studies"]) == studies
    assert _files(folders["root"]) == files
    assert _mine_in_tmp() == tmp and _children() == children
