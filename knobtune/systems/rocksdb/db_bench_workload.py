"""What a workload's ``[drivers.db_bench]`` section asks of db_bench beyond its benchmarks: ``threads`` and ``flags``.

``threads = N`` runs db_bench with ``--threads=N`` and keeps a rung's total work: db_bench 7.8.3 runs most
benchmarks on every thread, each doing ``--reads`` (``--writes``, ``--deletes``; default ``--num``) operations over
the whole key range, so N threads get ``ceil(records / N)`` each; ``--num`` stays the rung's records (the keys the
store holds). filluniquerandom always runs on one thread and writes ``--writes`` keys, so ``--writes`` is left at
``--num`` beside it; benchmarks that walk the keys from the first one on every thread (fillseq, readseq, ...) cannot
share a rung out and are refused with N > 1, as is a benchmark whose count per thread was not checked here
(docs/rocksdb.md, "Threads").

``flags`` passes db_bench's own workload flags from a fixed list (the mix of readrandomwriterandom, how skewed
reads are, how values compress, ...), each checked for its type and range and passed as one argv element.
A knob of the catalog is refused (the search sets knobs), and so are the flags knobtune sets itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knobtune.errors import WorkloadError
from knobtune.knobs import load_catalog
from knobtune.names import nearest
from knobtune.workloads import Workload

SECTION_FIELDS = ("benchmarks", "measure", "verify", "twin", "threads", "flags")
ONE_THREAD = frozenset({"filluniquerandom"})  # db_bench: "multithreaded not supported, use 1 thread"
PER_THREAD_COUNT = {  # benchmark -> the flag that counts each thread's operations (checked with --threads=2)
    "readrandom": "reads", "readwhilewriting": "reads", "multireadrandom": "reads", "readmissing": "reads",
    "seekrandom": "reads", "readrandomwriterandom": "reads", "updaterandom": "reads",  # these two: max(reads, writes)
    "fillrandom": "writes", "overwrite": "writes", "deleterandom": "deletes",
}
FROM_THE_FIRST_KEY = frozenset({"fillseq", "readseq", "readreverse", "deleteseq"})  # every thread walks keys 0, 1, ...
NO_COUNT = frozenset({"flush", "waitforcompaction", "compact", "stats"})  # maintenance: no operations to share
BENCHMARKS = frozenset({  # the names db_bench 7.8 runs (its --help's list and default, and filluniquerandom)
    "fillseq", "fillseqdeterministic", "fillrandom", "filluniquerandom", "filluniquerandomdeterministic",
    "fillanddeleteuniquerandom", "overwrite", "fillsync", "fill100K", "deleteseq", "deleterandom", "readseq",
    "readtocache", "readtorowcache", "readreverse", "readrandom", "readmissing", "multireadrandom", "readwhilewriting",
    "readwhilemerging", "readwhilescanning", "readrandomwriterandom", "updaterandom", "xorupdaterandom",
    "appendrandom", "mergerandom", "readrandommergerandom", "newiterator", "newiteratorwhilewriting", "seekrandom",
    "seekrandomwhilewriting", "seekrandomwhilemerging", "approximatesizerandom", "randomwithverify", "mixgraph",
    "fillseekseq", "randomtransaction", "randomreplacekeys", "timeseries", "getmergeoperands", "readrandomoperands",
    "compact", "compactall", "compact0", "compact1", "waitforcompaction", "flush", "stats", "resetstats",
    "levelstats", "memstats", "sstables",
})


@dataclass(frozen=True)
class Flag:
    """A workload flag of db_bench that a workload may set: its type, its range, and what it does."""

    kind: type  # int, float or bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the low bound itself is not allowed
    does: str = ""

    def check(self, value: object) -> str | None:
        """Why ``value`` does not fit (None: it does)."""
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{value!r} is not true or false"
        if isinstance(value, bool) or not isinstance(value, int if self.kind is int else (int, float)):
            return f"{value!r} is not {'a whole number' if self.kind is int else 'a number'}"
        if (self.low is not None and (value < self.low or (self.low_open and value == self.low))) \
                or (self.high is not None and value > self.high):
            return f"{value!r} is out of range ({self.range_text()})"
        return None

    def range_text(self) -> str:
        low = "" if self.low is None else f"{'over' if self.low_open else 'at least'} {self.low:g}"
        high = "" if self.high is None else f"at most {self.high:g}"
        return " and ".join(part for part in (low, high) if part)


ALLOWED_FLAGS: dict[str, Flag] = {
    "readwritepercent": Flag(int, 0, 100, does="readrandomwriterandom's (and randomwithverify's) share of reads, %"),
    "deletepercent": Flag(int, 0, 100, does="randomwithverify's share of deletes, %"),
    "numdistinct": Flag(int, 1, does="the distinct keys randomwithverify reads and writes"),
    "keys_per_prefix": Flag(int, 0, does="keys generated per key prefix (0: no grouping)"),
    "seek_nexts": Flag(int, 0, does="Next() calls after each Seek() of the seek benchmarks"),
    "reverse_iterator": Flag(bool, does="the seek benchmarks step with Prev() instead of Next()"),
    "read_random_exp_range": Flag(float, 0, does="how skewed readrandom's and multireadrandom's keys are (0: uniform)"),
    "compression_ratio": Flag(float, 0, 1, low_open=True, does="the fraction values shrink to when compressed"),
    "batch_size": Flag(int, 1, does="keys per write batch (and per MultiGet of multireadrandom)"),
    "multiread_batched": Flag(bool, does="multireadrandom uses the batched MultiGet API"),
}
LADDER = "the fidelity ladder sets it for each rung from `records`"
OWNED_FLAGS: dict[str, tuple[str, str]] = {  # flag -> (why knobtune sets it itself, the fix)
    "duration": ("a fixed duration makes every run take the same time: the elapsed_s objective could not tell configs "
                 "apart, and a rung would no longer be a size of work", "size the run with `records` and the ladder"),
    "num": (LADDER, "set `records`"),
    "reads": (LADDER, "set `records`"),
    "writes": (LADDER, "set `records`"),
    "deletes": (LADDER, "set `records`"),
    "threads": ("it is a field of the section", "write `threads = N` in [drivers.db_bench]"),
    "key_size": ("it is a field of the workload", "set `key_size` at the top of the file"),
    "value_size": ("it is a field of the workload", "set `value_size` at the top of the file"),
    "benchmarks": ("it is a field of the section", "list them in `benchmarks`"),
}
READWRITEPERCENT_DEFAULT = 90  # db_bench's


@dataclass(frozen=True)
class WorkloadFlags:
    """The section's ``threads`` and ``flags`` (``--name=value``, in the file's order)."""

    threads: int = 1
    flags: tuple[str, ...] = ()

    def argv(self, benchmarks: Sequence[str], records: int) -> list[str]:
        """``--threads`` and, with more than one, each thread's share of the rung's ``records``; then the flags."""
        if self.threads == 1:
            return ["--threads=1", *self.flags]
        share = math.ceil(records / self.threads)
        counts = ("reads", "deletes") if set(benchmarks) & ONE_THREAD else ("reads", "deletes", "writes")
        return [f"--threads={self.threads}", *(f"--{count}={share}" for count in counts), *self.flags]


@functools.cache
def knob_flags(system: str) -> frozenset[str]:
    """The db_bench flags that are knobs of ``system``'s catalog (the search sets them)."""
    knobs = load_catalog(system).knobs.values()
    return frozenset({knob.name for knob in knobs} | {knob.names.get("db_bench", knob.name) for knob in knobs})


def read_section(workload: Workload, section: Mapping[str, Any], knobs: frozenset[str]) -> WorkloadFlags:
    """The ``threads`` and ``flags`` of ``workload``'s db_bench ``section``, checked; ``knobs``: the knob flags.

    Raises:
        WorkloadError: one line naming the file, the field and the fix.
    """
    where = str(workload.source) if workload.source else f"workload '{workload.name}'"

    def fail(field_name: str, problem: str, fix: str) -> WorkloadError:
        return WorkloadError(f"{where}: field 'drivers.db_bench.{field_name}': {problem}. Fix: {fix}")

    for name in section:
        if name not in SECTION_FIELDS:
            raise fail(name, f"is not a field of the db_bench section{nearest(name, SECTION_FIELDS)}",
                       f"use {', '.join(SECTION_FIELDS)}, or put a db_bench flag under `flags`")
    benchmarks = section.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks or not all(isinstance(b, str) for b in benchmarks):
        raise fail("benchmarks", f"{benchmarks!r} is not a list of db_bench benchmarks", 'e.g. benchmarks = '
                   '["filluniquerandom", "readrandom"]')
    for key in ("benchmarks", "twin"):
        for name in section.get(key) or []:
            if name not in BENCHMARKS:
                raise fail(key, f"'{name}' is not a db_bench benchmark{nearest(str(name), sorted(BENCHMARKS))}",
                           "name benchmarks db_bench runs (`db_bench --help`, under --benchmarks), e.g. readrandom")
    for key in ("measure", "verify"):
        for name in section.get(key) or []:
            if name not in benchmarks:
                raise fail(key, f"'{name}' is not one of the benchmarks{nearest(str(name), benchmarks)}",
                           f"name benchmarks of `benchmarks`: {benchmarks}")
    threads = section.get("threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise fail("threads", f"{threads!r} is not a number of threads from 1 to 1024", "e.g. threads = 4")
    if threads > 1:
        for listed in (benchmarks, section.get("twin") or []):
            _check_shared_out(listed, threads, lambda problem, fix: fail("threads", problem, fix))
    return WorkloadFlags(threads, _flags(section.get("flags", {}), knobs, fail))


def _check_shared_out(benchmarks: Sequence[str], threads: int, fail: Callable[[str, str], WorkloadError]) -> None:
    """Refuse benchmarks whose work ``threads`` threads cannot share out as the rung's records."""
    if walking := [b for b in benchmarks if b in FROM_THE_FIRST_KEY]:
        raise fail(f"threads = {threads} with {', '.join(walking)}: every db_bench thread walks the keys from the "
                   f"first one, so {threads} threads would do the same keys {threads} times, not share them",
                   "threads = 1 for sequential benchmarks, or random ones (fillrandom, readrandom, ...)")
    if unknown := [b for b in benchmarks if b not in PER_THREAD_COUNT and b not in ONE_THREAD and b not in NO_COUNT]:
        raise fail(f"threads = {threads} with {', '.join(unknown)}: how db_bench counts its operations per thread "
                   "was not checked", f"threads = 1, or benchmarks of {', '.join(sorted(PER_THREAD_COUNT))}")
    one = [b for b in benchmarks if b in ONE_THREAD]
    if one and (writes := [b for b in benchmarks if PER_THREAD_COUNT.get(b) == "writes"]):
        raise fail(f"threads = {threads} with {one[0]} and {', '.join(writes)}: db_bench runs {one[0]} on one "
                   f"thread and {writes[0]} on every thread, and its one --writes counts both",
                   f"fill with fillrandom instead, or run {', '.join(writes)} in a workload of its own")


def _flags(table: object, knobs: frozenset[str], fail: Callable[[str, str, str], WorkloadError]) -> tuple[str, ...]:
    """``--name=value`` for each flag of the ``flags`` table, checked."""
    if not isinstance(table, dict):
        raise fail("flags", f"{table!r} is not a table of db_bench flags", "e.g. flags = { readwritepercent = 50 }")
    flags = []
    for name, value in table.items():
        if name in knobs:
            raise fail(f"flags.{name}", f"'{name}' is a tuning knob, which the search sets",
                       "remove it from the workload (`--knobs` chooses the knobs a study searches)")
        if name in OWNED_FLAGS:
            why, fix = OWNED_FLAGS[name]
            raise fail(f"flags.{name}", f"knobtune sets --{name} itself: {why}", fix)
        if name not in ALLOWED_FLAGS:
            raise fail(f"flags.{name}", f"'{name}' is not a db_bench workload flag knobtune passes",
                       f"use one of {', '.join(ALLOWED_FLAGS)} (docs/workloads.md)")
        if problem := ALLOWED_FLAGS[name].check(value):
            raise fail(f"flags.{name}", problem, f"give {ALLOWED_FLAGS[name].range_text() or 'true or false'}")
        flags.append(f"--{name}={_text(value)}")
    reads = table.get("readwritepercent", READWRITEPERCENT_DEFAULT)
    if "deletepercent" in table and table["deletepercent"] >= 100 - reads:
        raise fail("flags.deletepercent", f"{table['deletepercent']} leaves randomwithverify no writes: db_bench takes "
                   f"deletepercent under 100 - readwritepercent ({reads})",
                   f"a deletepercent under {100 - reads}, or a smaller readwritepercent")
    return tuple(flags)


def _text(value: bool | int | float) -> str:
    """A flag's value as db_bench's gflags read it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else repr(float(value))
