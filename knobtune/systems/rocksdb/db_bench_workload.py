"""What a workload's ``[drivers.db_bench]`` section asks of db_bench beyond its benchmarks: ``threads`` and ``flags``.

``threads = N`` runs db_bench with ``--threads=N`` and keeps a rung's total work: db_bench 7.8.3 runs most
benchmarks on every thread, each doing ``--reads`` (``--writes``, ``--deletes``; default ``--num``) operations over
the whole key range, so N threads get ``ceil(records / N)`` each; ``--num`` stays the rung's records (the keys the
store holds). filluniquerandom always runs on one thread and writes ``--writes`` keys, so ``--writes`` is left at
``--num`` beside it; benchmarks that walk the keys from the first one on every thread (fillseq, readseq, ...) cannot
share a rung out and are refused with N > 1, as is a benchmark whose count per thread was not checked here
(docs/rocksdb.md, "Threads").

``flags`` passes db_bench's own workload flags from a fixed list (``DbBenchFlags``: the mix of
readrandomwriterandom, how skewed reads are, how values compress, ...), each checked for its type and range (the
section is read through the schema) and passed as one argv element.
A knob of the catalog is refused (the search sets knobs), and so are the flags knobtune sets itself.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knobtune import schema
from knobtune.errors import WorkloadError
from knobtune.knobs import load_catalog
from knobtune.names import nearest
from knobtune.schema import required, setting
from knobtune.workloads import Workload

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


@dataclass(frozen=True, kw_only=True)
class DbBenchFlags:
    """db_bench's own workload flags a workload may set (``flags``), each with its type and range; ``note``: what
    it does (docs/workloads.md lists them)."""

    readwritepercent: int | None = setting(None, least=0, most=100, example=50,
                                           note="readrandomwriterandom's (and randomwithverify's) share of reads, %")
    deletepercent: int | None = setting(None, least=0, most=100, example=10,
                                        note="randomwithverify's share of deletes, %")
    numdistinct: int | None = setting(None, least=1, example=1000,
                                      note="the distinct keys randomwithverify reads and writes")
    keys_per_prefix: int | None = setting(None, least=0, example=0, note="keys generated per key prefix (0: no "
                                                                          "grouping)")
    seek_nexts: int | None = setting(None, least=0, example=10, note="Next() calls after each Seek() of the seek "
                                                                      "benchmarks")
    reverse_iterator: bool | None = setting(None, example=True, note="the seek benchmarks step with Prev() instead "
                                                                      "of Next()")
    read_random_exp_range: float | None = setting(None, least=0, example=0.0,
                                                  note="how skewed readrandom's and multireadrandom's keys are (0: "
                                                       "uniform)")
    compression_ratio: float | None = setting(None, positive=True, most=1, example=0.5,
                                              note="the fraction values shrink to when compressed")
    batch_size: int | None = setting(None, least=1, example=8, note="keys per write batch (and per MultiGet of "
                                                                     "multireadrandom)")
    multiread_batched: bool | None = setting(None, example=True, note="multireadrandom uses the batched MultiGet API")


@dataclass(frozen=True, kw_only=True)
class DbBenchSection:
    """A workload's ``[drivers.db_bench]`` section (docs/workloads.md)."""

    benchmarks: tuple[str, ...] = required(items="sequence", example=["filluniquerandom", "readrandom"])
    measure: tuple[str, ...] | None = setting(None, example=["readrandom"])
    verify: tuple[str, ...] | None = setting(None, example=["readrandom"])
    twin: tuple[str, ...] | None = setting(None, items="sequence", example=["filluniquerandom", "readrandom"])
    threads: int = setting(1, least=1, most=1024, example=4)
    flags: DbBenchFlags | None = None


ALLOWED_FLAGS = tuple(f.name for f in dataclasses.fields(DbBenchFlags))
SECTION_FIELDS = tuple(f.name for f in dataclasses.fields(DbBenchSection))
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
    """The ``threads`` and ``flags`` of ``workload``'s db_bench ``section``, read through the schema
    (``DbBenchSection``: a misspelt field at any depth refused with the nearest name, types and ranges) and checked
    whole; ``knobs``: the knob flags.

    Raises:
        WorkloadError: one line per problem naming the file, the field and the fix.
    """
    source = f"{workload.source or f'workload {workload.name!r}'}: [drivers.db_bench]"

    def fail(field_name: str, problem: str, fix: str) -> WorkloadError:
        return WorkloadError(f"{source}: {field_name}: {problem}. Fix: {fix}")

    raw_flags = section.get("flags", {})
    if isinstance(raw_flags, Mapping):
        _not_ours(raw_flags, knobs, fail)  # said before the schema's "unknown field": why knobtune refuses it
    read = schema.read(DbBenchSection, dict(section), schema.Where(source, docs="docs/workloads.md"), WorkloadError)
    for key, listed in (("benchmarks", read.benchmarks), ("twin", read.twin or ())):
        for name in listed:
            if name not in BENCHMARKS:
                raise fail(key, f"'{name}' is not a db_bench benchmark{nearest(str(name), sorted(BENCHMARKS))}",
                           "name benchmarks db_bench runs (`db_bench --help`, under --benchmarks), e.g. readrandom")
    for key, listed in (("measure", read.measure or ()), ("verify", read.verify or ())):
        for name in listed:
            if name not in read.benchmarks:
                raise fail(key, f"'{name}' is not one of the benchmarks{nearest(str(name), read.benchmarks)}",
                           f"name benchmarks of `benchmarks`: {list(read.benchmarks)}")
    if read.threads > 1:
        for benchmarks in (read.benchmarks, read.twin or ()):
            _check_shared_out(benchmarks, read.threads, lambda problem, fix: fail("threads", problem, fix))
    flags = read.flags or DbBenchFlags()
    reads = READWRITEPERCENT_DEFAULT if flags.readwritepercent is None else flags.readwritepercent
    if flags.deletepercent is not None and flags.deletepercent >= 100 - reads:
        raise fail("flags.deletepercent", f"{flags.deletepercent} leaves randomwithverify no writes: db_bench takes "
                   f"deletepercent under 100 - readwritepercent ({reads})",
                   f"a deletepercent under {100 - reads}, or a smaller readwritepercent")
    return WorkloadFlags(read.threads, tuple(f"--{name}={_text(value)}" for name, value in raw_flags.items()))


def _not_ours(flags: Mapping[str, Any], knobs: frozenset[str], fail: Callable[[str, str, str], WorkloadError]) -> None:
    """Refuse a flag that is a knob (the search sets it) or one knobtune sets itself, saying why."""
    for name in flags:
        if name in knobs:
            raise fail(f"flags.{name}", f"'{name}' is a tuning knob, which the search sets",
                       "remove it from the workload (`--knobs` chooses the knobs a study searches)")
        if name in OWNED_FLAGS:
            why, fix = OWNED_FLAGS[name]
            raise fail(f"flags.{name}", f"knobtune sets --{name} itself: {why}", fix)


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


def _text(value: bool | int | float) -> str:
    """A flag's value as db_bench's gflags read it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else repr(float(value))
