"""A corpus of bad inputs across every command and file format, run in-process as users run ``knobtune``.

Each must end in exactly one line on stderr (``error: ... Fix: ...``), exit status 2, no traceback, and nothing
created or changed: no study, no file or folder (in the studies folder, the working folder or the temporary folder),
no byte of an existing file (the studies database, a user's file an ``-o`` names), no process.

``{files}`` in a case is the folder of bad (and of a user's own) files, ``{studies}`` the studies folder, ``{new}`` a
folder that does not exist (a case run with ``--dir {new}`` must not make it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from knobtune.cli import run
from knobtune.systems import forget_system_files
from knobtune.storage import open_store
from knobtune.tuning import attrs

from bad_files import CAPTURE_FILES, CATALOG_FILES, CONFIG_FILES, WORKLOAD_FILES, write_bad_files
from bad_files import cases as file_cases
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
    "mix-unknown-op.toml": (MIX, "update = 0.5", "upsert = 0.5", "mix.upsert'.*use one of read, update"),
    "mix-count.toml": (MIX, 'kind = "mix",', 'kind = "mix", count = 5,', "sets a mix phase's count itself"),
    "phases-empty.toml": (MIX, 'phases = [{ name = "load", kind = "fill" }, { name = "run", kind = "mix", mix = '
                               '{ read = 0.5, update = 0.5 } }]', "phases = []", "not a non-empty list of phases"),
    "kind-explode.toml": (DB_BENCH, 'kind = "read"', 'kind = "explode"',
                          "'explode' is not a kvbench phase kind.*fill, read"),
    "order-bad.toml": (DB_BENCH, 'order = "random"', 'order = "randm"', "did you mean 'random'"),
    "phase-field.toml": (DB_BENCH, 'kind = "read",', 'kind = "read", expct = "all",',
                         "'phases #2.expct' .did you mean 'expect'"),
    "measure-bad.toml": (MIX, 'measure = ["run"]', 'measure = ["rn"]', "'rn' is not a phase"),
    "kvbench-field.toml": (DB_BENCH, "[drivers.kvbench]\n", "[drivers.kvbench]\nthread = 4\n",
                           "did you mean 'threads'"),
    "bench-unknown.toml": (DB_BENCH, '"readrandom"]', '"readrandon"]', "'readrandon' is not a db_bench benchmark"),
    "bench-field.toml": (DB_BENCH, "[drivers.db_bench]\n", "[drivers.db_bench]\nmeasur = []\n",
                         "did you mean 'measure'"),
    "bench-measure.toml": (DB_BENCH, "[drivers.db_bench]\n", '[drivers.db_bench]\nmeasure = ["nope"]\n',
                           "'nope' is not one"),
    "bench-flag.toml": (DB_BENCH, "[drivers.db_bench]\n", "[drivers.db_bench]\nflags = { nosuch = 1 }\n",
                        "unknown field 'flags.nosuch'. Fix: remove it"),
    "name-path.toml": (DB_BENCH, 'name = "tiny"', 'name = "../../tiny"', "name '../../tiny' holds a path separator"),
    "ladder-text.toml": (DB_BENCH, "ladder = [0.5, 1.0]", 'ladder = "abc"',
                         "ladder 'abc' is not a non-empty list of numbers"),
    "key-small.toml": (DB_BENCH, "records = 2000", "records = 2000\nkey_size = 4",
                       "key_size 4 is below 8.*the drivers' keys need 8"),
    "systems-text.toml": (DB_BENCH, 'systems = ["rocksdb", "leveldb"]', 'systems = "rocksdb"',
                          "systems 'rocksdb' is not a list of names"),
}
CONFIGS = {  # file name -> (JSON text, the error's words)
    "unknown-knob.json": ('{"nosuch_knob": 1}', "nosuch_knob"),
    "bad-enum.json": ('{"compaction_style": "sideways"}', "compaction_style"),
    "out-of-range.json": ('{"max_background_jobs": -5}', "max_background_jobs"),
    "not-json.json": ("{nope", "json"),
    "nan.json": ('{"write_buffer_size": NaN}', "holds NaN, which is no knob's value"),
    "infinity.json": ('{"system": "rocksdb", "config": {"max_background_jobs": -Infinity}}', "holds -Infinity"),
    "latin1.json": ('{"block_size": "4096 caf\xe9"}', "is not UTF-8 text"),  # written in Latin-1 below
    "leveldb-export.json": ('{"written_by": "knobtune 0.4.0", "system": "leveldb", "config": {"write_buffer_size": '
                            '8388608}}', "is a config of leveldb, not rocksdb"),
    "report-data.json": ('{"written_by": "knobtune 0.4.0", "summary": {"study": "old-release"}}', "holds no config"),
}
MINE = {  # a user's own files, which no -o may overwrite (without --force): name -> text
    "mine.txt": "my notes\n",
    "mine.json": '{"my": "data"}\n',
    "mine.html": "<!DOCTYPE html><html><head><title>mine</title></head><body>mine</body></html>\n",
    "page.json": '{"not": "the report\'s"}\n',
}


def _expected(path: Path) -> str:
    return path.read_bytes().split(b"\n", 1)[0].decode().removeprefix("# expect: ")


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
    ("system-file-misspelt-deep", ("knobs", "{files}/mymaria/misspelt-deep.toml"),
     "unknown field 'settle.wiat' .did you mean 'wait'.*Fix: "),
    ("system-file-wrong-type", ("knobs", "{files}/mymaria/poll-text.toml"),
     "settle.wait.poll_s 'fast' is not a number"),
    ("catalog-bad-type", ("knobs", str(CORPUS / "catalogs" / "bad-type.toml")), "Fix: "),
    ("catalog-bad-toml", ("knobs", str(CORPUS / "catalogs" / "bad-toml.toml")), "Fix: "),
    ("workload-syntax", ("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-syntax.toml"), "--trials",
                         "1"), "Fix: "),
    ("workload-ladder-end", ("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-ladder-end.toml"),
                             "--trials", "1"), "ladder"),
    ("workload-objective", ("tune", "rocksdb", "--workload", str(CORPUS / "workloads" / "bad-objective.toml"),
                            "--trials", "1"), "objective"),
    ("workload-missing-file", ("tune", "rocksdb", "--workload", "{files}/nosuch.toml", "--trials", "1"), "Fix: "),
    ("pgbench-misspelt", ("tune", "postgresql", "--workload", "{files}/cleints.toml", "--trials", "1"),
     r"\[drivers.pgbench\]: unknown field 'cleints' .did you mean 'clients'"),
    ("pgbench-scale-text", ("tune", "postgresql", "--workload", "{files}/scale-big.toml", "--trials", "1"),
     "scale 'big' is not a whole number"),
    ("sysbench-misspelt-check", ("tune", "postgresql", "--driver", "sysbench", "--workload", "{files}/chekc.toml",
                                 "--trials", "1"), "unknown field 'chekc' .did you mean 'check'"),
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
R = ("tune", "rocksdb", "--workload", "put-get-delete", "--trials", "1")
SW = (*S, "--knob", "write_buffer_size")
CAP = ("capture", "rocksdb", "--from", "{files}/mine.txt")
DESTROYED: list[tuple[str, tuple[str, ...], str]] = [  # an -o over what is not knobtune's to overwrite
    ("export-over-studies-db", ("export", "old-release", "-o", "{studies}/studies.db"), "is a SQLite database"),
    ("export-over-a-copied-db", ("export", "old-release", "-o", "{files}/copy.db"), "is a SQLite database"),
    ("export-over-db-journal", ("export", "old-release", "-o", "{files}/copy.db-journal", "--force"),
     "is a SQLite database"),
    ("export-over-db-forced", ("export", "old-release", "-o", "{studies}/studies.db", "--force"),
     "never writes over one"),
    ("export-over-users-file", ("export", "old-release", "-o", "{files}/mine.txt"),
     "mine.txt exists and is not knobtune's JSON.*add --force"),
    ("export-over-users-json", ("export", "old-release", "-o", "{files}/mine.json"), "is not knobtune's JSON"),
    ("export-options-over-users-file", ("export", "old-release", "--format", "rocksdb-options", "-o",
                                        "{files}/mine.txt"), "is not knobtune's text"),
    ("export-flags-over-users-file", ("export", "old-release", "--format", "db_bench-flags", "-o",
                                      "{files}/mine.txt"), "no comment to mark it"),
    ("export-into-a-capture", ("export", "old-release", "-o", "{files}/app.capture/OPTIONS.ini"),
     "inside the capture"),
    ("export-over-a-capture-file", ("export", "old-release", "-o", "{files}/app.capture/capture.toml", "--force"),
     "inside the capture"),
    ("report-over-users-html", ("report", "old-release", "-o", "{files}/mine.html"), "is not knobtune's HTML"),
    ("report-json-beside-over-users", ("report", "old-release", "-o", "{files}/page.html"),
     "page.json exists and is not knobtune's JSON"),
    ("report-json-over-users", ("report", "old-release", "-o", "{files}/mine.json"), "is not knobtune's JSON"),
    ("report-json-over-a-db", ("report", "old-release", "-o", "{files}/db.json"), "is a SQLite database"),
    ("report-unknown-suffix", ("report", "old-release", "-o", "{files}/r.txt"), "writes .html.*or .json.*not '.txt'"),
    ("report-no-suffix", ("report", "old-release", "-o", "{files}/report"), "not 'no suffix'"),
    ("baseline-over-users-json", ("baseline", "rocksdb", "-o", "{files}/mine.json"), "is not knobtune's JSON"),
    ("baseline-over-studies-db", ("baseline", "rocksdb", "-o", "{studies}/studies.db"), "is a SQLite database"),
    ("sweep-over-users-html", (*SW, "-o", "{files}/mine.html"), "is not knobtune's HTML"),
    ("sweep-unknown-suffix", (*SW, "-o", "{files}/sweep.png"), "not '.png'"),
    ("capture-over-a-file", (*CAP, "-o", "{files}/mine.json"), "exists and is not an empty folder"),
    ("capture-over-a-folder", (*CAP, "-o", "{files}"), "exists and is not an empty folder"),
    ("capture-inside-a-capture", (*CAP, "-o", "{files}/app.capture/more"), "is inside the capture"),
    ("capture-over-studies-db", (*CAP, "-o", "{studies}/studies.db"), "exists and is not an empty folder"),
]
SIDE_EFFECTS: list[tuple[str, tuple[str, ...], str]] = [  # refused with --dir {new}: the folder is not made
    ("new-dir-storage-bogus", (*T, "--storage", "bogus://x", "--dir", "{new}"), "cannot open storage"),
    ("new-dir-storage-no-folder", (*T, "--storage", "sqlite:///{new}/x/studies.db", "--dir", "{new}"),
     "does not exist"),
    ("new-dir-storage-not-sqlite", (*T, "--storage", "sqlite:///{files}/mine.txt", "--dir", "{new}"),
     "is not a SQLite database"),
    ("new-dir-storage-a-folder", (*T, "--storage", "sqlite:///{files}", "--dir", "{new}"), "not a SQLite database"),
    ("new-dir-show", ("show", "old-release", "--dir", "{new}"), "no study 'old-release'.*studies there: none"),
    ("new-dir-export", ("export", "old-release", "-o", "{new}/x.json", "--dir", "{new}"), "no study 'old-release'"),
    ("new-dir-report", ("report", "old-release", "-o", "{new}/r.html", "--dir", "{new}"), "no study 'old-release'"),
    ("new-dir-explain", ("explain", "old-release", "--dir", "{new}"), "no study 'old-release'"),
    ("new-dir-worker", ("worker", "--study", "old-release", "--dir", "{new}"), "no study 'old-release'"),
    ("new-dir-start-from", (*T, "--start-from", "old-release", "--dir", "{new}"), "no study 'old-release'"),
    ("new-dir-compare-config", (*C, "--config", "default", "--config", "{files}/nan.json", "--dir", "{new}"),
     "holds NaN"),
    ("new-dir-knob", (*T, "--knobs", "nosuch_knob", "--dir", "{new}"), "unknown knob"),
    ("new-dir-rank", ("rank", "rocksdb", "--workload", "fillrandom", "--samples", "3", "--dir", "{new}"),
     "is below 8"),
    ("new-dir-sweep", (*SW, "--points", "1", "--dir", "{new}"), "is below 2"),
    ("resume-another-workload", (*R, "--study", "old-release", "--objective", "ops_per_s", "--records", "3000"),
     "was created with workload.objective = 'elapsed_s'"),
    ("resume-a-tuning-as-ranking", ("rank", "rocksdb", "--workload", "put-get-delete", "--records", "3000",
                                    "--objective", "elapsed_s", "--study", "old-release"), "search.only_rung"),
    ("capture-run-unwritable", ("capture", "rocksdb", "--workload", "fillrandom", "-o", "/proc/nope/x.capture"),
     "not a writable folder"),
    ("capture-run-over-a-file", ("capture", "rocksdb", "--workload", "fillrandom", "-o", "{files}/mine.txt"),
     "exists and is not an empty folder"),
    ("capture-under-a-file", (*CAP, "-o", "{files}/mine.txt/x.capture"), "not a writable folder"),
]
BOUNDS: list[tuple[str, tuple[str, ...], str]] = [
    ("trials-huge", ("tune", "rocksdb", "--workload", "fillrandom", "--trials", "100000"), "--trials 100000 is above "
                                                                                           "10000"),
    ("repeats-huge", (*T, "--repeats", "100000000"), "--repeats 100000000 is above 100"),
    ("verify-top-huge", (*T, "--verify-top", "100000"), "--verify-top 100000 is above 10000"),
    ("compare-repeats-huge", (*C, "--config", "default", "--config", "default", "--repeats", "1000"),
     "--repeats 1000 is above 100"),
    ("explain-repeats-huge", ("explain", "old-release", "--repeats", "1000"), "--repeats 1000 is above 100"),
    ("sweep-points-huge", (*SW, "--points", "2000"), "--points 2000 is above 50"),
    ("sweep-repeats-huge", (*SW, "--repeats", "1000"), "--repeats 1000 is above 100"),
    ("top-k-huge", (*T, "--ranking", "rank-old", "--top-k", "1000"), "--top-k 1000 is above the 5 knobs"),
    ("top-k-one-over", (*T, "--ranking", "rank-old", "--top-k", "6"), "--top-k 6 is above the 5 knobs"),
    ("rank-samples-huge", ("rank", "rocksdb", "--workload", "fillrandom", "--samples", "100000"),
     "--samples 100000 is above 10000"),
]
KINDS: list[tuple[str, tuple[str, ...], str]] = [  # a study, ranking or config of another system or kind
    ("start-from-a-ranking", (*T, "--start-from", "rank-old"), "--start-from: study 'rank-old' is a knob ranking"),
    ("start-from-another-system", (*T, "--start-from", "leveldb-old"), "study 'leveldb-old' is of leveldb, not "
                                                                       "rocksdb"),
    ("ranking-another-system", (*T, "--ranking", "leveldb-old", "--top-k", "2"), "--ranking: study 'leveldb-old' is "
                                                                                 "of leveldb"),
    ("ranking-a-tuning-study", (*T, "--ranking", "old-release", "--top-k", "2"), "holds no knob ranking"),
    ("export-a-ranking", ("export", "rank-old", "-o", "{new}/x.json"), "export: study 'rank-old' is a knob ranking"),
    ("top-k-of-a-ranked-tuning-study", (*T, "--ranking", "old-release-ranked", "--top-k", "9"), "above the 5 knobs"),
    ("explain-a-ranking", ("explain", "rank-old"), "explain: study 'rank-old' is a knob ranking"),
    ("compare-study-a-ranking", (*C, "--config", "default", "--config", "study:rank-old"), "is a knob ranking"),
    ("compare-study-another-system", ("compare", "leveldb", "--workload", "fillrandom", "--config", "default",
                                      "--config", "study:old-release"), "is of rocksdb, not leveldb"),
    ("compare-config-another-system", (*C, "--config", "default", "--config", "{files}/leveldb-export.json"),
     "is a config of leveldb, not rocksdb"),
    ("compare-config-a-report", (*C, "--config", "default", "--config", "{files}/report-data.json"),
     "holds no config"),
    ("diagnose-config-a-ranking", ("diagnose", "rocksdb", "--workload", "fillrandom", "--config", "study:rank-old"),
     "is a knob ranking"),
    ("sweep-around-a-ranking", (*SW, "--around", "rank-old"), "--around: study 'rank-old' is a knob ranking"),
    ("rank-from-another-system", ("rank", "leveldb", "--workload", "fillrandom", "--from-study", "old-release"),
     "--from-study: study 'old-release' is of rocksdb, not leveldb"),
    ("resume-a-ranking-as-tuning", (*R, "--study", "rank-old", "--records", "3000", "--objective", "elapsed_s"),
     "search.only_rung"),
]
TWICE: list[tuple[str, tuple[str, ...], str]] = [  # an option of one value given twice
    ("time-twice", ("tune", "rocksdb", "--workload", "fillrandom", "--time", "5m", "--time", "10m"),
     "--time is given 2 times"),
    ("experiment-twice", ("tune", "--experiment", str(CORPUS / "experiments" / "good-minimal.toml"), "--experiment",
                          str(CORPUS / "experiments" / "good-everything.toml")), "--experiment is given 2 times"),
    ("trials-twice", (*T, "--trials", "5"), "--trials is given 2 times"),
    ("study-twice", (*T, "--study", "a", "--study", "b"), "--study is given 2 times"),
    ("workload-twice", (*T, "--workload", "put-get-delete"), "--workload is given 2 times"),
    ("report-o-twice", ("report", "old-release", "-o", "{new}/a.html", "--output", "{new}/b.html"),
     "-o or --output is given 2 times"),
    ("export-format-twice", ("export", "old-release", "--format", "json", "--format", "rocksdb-options"),
     "--format is given 2 times"),
    ("compare-repeats-twice", (*C, "--config", "default", "--config", "default", "--repeats", "3", "--repeats", "5"),
     "--repeats is given 2 times"),
    ("sweep-points-twice", (*SW, "--points", "3", "--points", "5"), "--points is given 2 times"),
    ("rank-samples-twice", ("rank", "rocksdb", "--workload", "fillrandom", "--samples", "8", "--samples", "9"),
     "--samples is given 2 times"),
    ("baseline-profile-twice", ("baseline", "postgresql", "--profile", "oltp", "--profile", "web"),
     "--profile is given 2 times"),
    ("capture-o-twice", (*CAP, "-o", "{new}/a.capture", "-o", "{new}/b.capture"), "is given 2 times"),
    ("dir-twice", ("show", "old-release", "--dir", "{studies}", "--dir", "{new}"), "--dir is given 2 times"),
]
TRACEBACKS: list[tuple[str, tuple[str, ...], str]] = [  # each was a traceback
    ("workload-latin1", ("tune", "rocksdb", "--workload", "{files}/latin1.toml", "--trials", "1"),
     "cannot read the workload: not UTF-8 text"),
    ("system-file-latin1", ("knobs", "{files}/latin1.toml"), "not UTF-8 text"),
    ("diagnose-config-nan", ("diagnose", "rocksdb", "--workload", "fillrandom", "--config", "{files}/nan.json"),
     "holds NaN"),
    ("compare-config-infinity", (*C, "--config", "default", "--config", "{files}/infinity.json"), "holds -Infinity"),
    ("compare-config-latin1", (*C, "--config", "default", "--config", "{files}/latin1.json"), "is not UTF-8 text"),
]
FILES = file_cases()  # a misspelt or wrongly typed field of a workload, a capture, a catalog, a config (bad_files.py)
CASES += DESTROYED + SIDE_EFFECTS + BOUNDS + KINDS + TWICE + TRACEBACKS + FILES
KVBENCH_ONLY = {"workload-kind-explode", "workload-order-bad", "workload-phase-field", "workload-kvbench-field"}


@pytest.fixture(autouse=True)
def systems_as_shipped() -> Iterator[None]:
    """A case that names a system file makes its system known to this process; the next tests (in this process:
    the whole suite) must not see it."""
    yield
    forget_system_files()


def test_the_corpus_is_large_and_every_case_named_once() -> None:
    assert len(CASES) >= 60 and len({case for case, _, _ in CASES}) == len(CASES)
    assert all(len(cases) >= 10 for cases in (DESTROYED, SIDE_EFFECTS, BOUNDS, KINDS, TWICE))
    assert all(len(files) >= 10 for files in (WORKLOAD_FILES, CAPTURE_FILES, CATALOG_FILES, CONFIG_FILES))


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
        (files / name).write_text(text, encoding="latin-1" if name.startswith("latin1") else "utf-8")
    (files / "latin1.toml").write_bytes(DB_BENCH.replace('name = "tiny"', 'name = "tiny"\n# caf\xe9').encode("latin-1"))
    for name, text in MINE.items():
        (files / name).write_text(text)
    write_bad_files(files)
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", files / "copy.db")
    (files / "copy.db-journal").write_bytes(b"")
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", files / "db.json")
    capture = files / "app.capture"
    capture.mkdir(mode=0o700)
    (capture / "capture.toml").write_text('name = "app"\n')
    (capture / "OPTIONS.ini").write_text("# the user's own\n")
    _derived_studies(studies)
    maria = files / "mymaria"
    shutil.copytree(SYSTEM_FILES / "mariadb", maria)
    for file in ("system.toml", "catalog.toml"):
        text = (maria / file).read_text()
        text = re.sub(r'^(name|system) = "mariadb"', r'\1 = "mymaria"', text, flags=re.M)
        (maria / file).write_text(text.replace('"/usr/sbin/mariadbd"', '"/nonexistent/mariadbd"'))
    (maria / "misspelt.toml").write_text('clean_stopp = "SIGTERM"\n' + (maria / "system.toml").read_text())
    (maria / "misspelt-deep.toml").write_text((maria / "system.toml").read_text().replace("wait = {", "wiat = {"))
    poll_text = (maria / "system.toml").read_text().replace("poll_s = 0.2", 'poll_s = "fast"')
    (maria / "poll-text.toml").write_text(poll_text)
    tpcb = (SYSTEM_FILES.parent / "workloads" / "data" / "pgbench-tpcb.toml").read_text()
    (files / "cleints.toml").write_text(tpcb.replace("clients = 8", "cleints = 8"))
    (files / "scale-big.toml").write_text(tpcb.replace("scale = 50", 'scale = "big"'))
    oltp = (SYSTEM_FILES.parent / "workloads" / "data" / "oltp_read_write.toml").read_text()
    (files / "chekc.toml").write_text(oltp.replace("[drivers.sysbench.check]", "[drivers.sysbench.chekc]"))
    good = (CORPUS / "catalogs" / "good-minimal.toml").read_text()
    (files / "catalog.toml").write_text(good.replace('version = "1"', 'verison = "1"'))
    workload = (SYSTEM_FILES.parent / "workloads" / "data" / "oltp_read_write.toml").read_text()
    (files / "maria.toml").write_text(workload.replace('systems = ["mariadb", "postgresql"]', 'systems = ["mymaria"]'))
    work = root / "cwd"
    work.mkdir()
    return {"studies": studies, "files": files, "cwd": work, "root": root}


def _derived_studies(studies: Path) -> None:
    """Beside old-release: rank-old, a knob ranking (as `knobtune rank` stores one: every config at rung 0, its
    ranking of 5 knobs); old-release-ranked, the tuning study with that ranking stored on it (`rank --from-study`);
    leveldb-old, a study of another system."""
    store = open_store(studies)
    storage = store.storage()
    for name in ("rank-old", "old-release-ranked", "leveldb-old"):
        optuna.copy_study(from_study_name="old-release", from_storage=storage, to_storage=storage, to_study_name=name)
    order = ["write_buffer_size", "max_background_jobs", "block_size", "bloom_bits",
             "level0_file_num_compaction_trigger"]
    ranking = {"rung": 0, "order": order, "methods": {}, "agreement": {}, "top_k_stability": {}, "samples": 8}
    for name in ("rank-old", "old-release-ranked"):
        optuna.load_study(study_name=name, storage=storage).set_user_attr(attrs.RANKING, ranking)
    optuna.load_study(study_name="rank-old", storage=storage).set_user_attr(attrs.OLD_ONLY_RUNG, 0)
    optuna.load_study(study_name="leveldb-old", storage=storage).set_user_attr(attrs.SYSTEM, "leveldb")


def _studies(folder: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(folder / "studies.db")) as db:
        return {name for (name,) in db.execute("SELECT study_name FROM studies")}


def _files(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``, a file with the digest of its bytes."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
            for path in root.rglob("*")}


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
    argv = [arg.replace("{files}", str(folders["files"])).replace("{studies}", str(folders["studies"]))
            .replace("{new}", str(folders["root"] / "new")) for arg in args]
    if argv[0] not in ("knobs", "baseline", "clean", "capture") and "--dir" not in argv:
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
