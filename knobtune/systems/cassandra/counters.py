"""Cassandra's own counters over a run: flushes, compactions, GC pauses, dropped messages, cache hits.

Read right after the node started and right after the benchmark, before the
settle kills it; the run's counters are the differences (``counters.toml``
says what each means and where it is read). One reading is one session of the
DataStax Python driver (``cassandra-driver``) on loopback, opened, asked three
of the node's own tables and shut down, plus a pass over the node's GC log and
its system.log: a fraction of a second, where a ``nodetool`` call starts a JVM
for seconds (and needs JMX, which the node runs without).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import KnobtuneError

_THREAD_POOLS = "SELECT name, active_tasks, pending_tasks, completed_tasks FROM system_views.thread_pools"
_CACHES = "SELECT name, hit_count, request_count FROM system_views.caches"
_COMPACTIONS = "SELECT count(*), sum(bytes_in) FROM system.compaction_history"
# [1.234s][gc          ] GC(3) Pause Young (Normal) (G1 Evacuation Pause) 58M->28M(1024M) 18.690ms  (G1: tag gc)
# [1.357s][gc,phases   ] GC(0) Pause Mark Start 0.010ms                                              (ZGC: gc,phases)
_GC_PAUSE = re.compile(r"^\[[^\]]*\]\[gc(?:,phases)?\s*\] GC\(\d+\) Pause .* (\d+(?:\.\d+)?)ms$", re.MULTILINE)
# the heap in use before a G1 pause, its size after and the heap's size: "58M->28M(1024M)"
_GC_HEAP = re.compile(r"^\[[^\]]*\]\[gc\s*\] GC\(\d+\) Pause .* (\d+)([KMG])->\d+[KMG]\(\d+[KMG]\) [\d.]+ms$",
                      re.MULTILINE)
_HEAP_UNIT = {"K": 2**10, "M": 2**20, "G": 2**30}
# MUTATION_REQ messages were dropped in last 5000 ms: 3 internal and 0 cross node. ...  (every 5 s, when any)
_DROPPED = re.compile(r"(MUTATION_REQ|READ_REQ) messages were dropped in last \d+ ms: (\d+) internal and (\d+) cross")
# Enqueuing flush of ycsb.usertable, Reason: MEMTABLE_LIMIT, Usage: ...
_SWITCH = re.compile(r"Enqueuing flush of \S+, Reason: (\w+)")
TIMEOUT_S = 10.0  # to connect, and for each query: the node answers in milliseconds even under load


class CountersUnanswered(KnobtuneError):
    """The node did not answer the counters' queries (not there, refused, timed out): the machine's fault, not the
    config's."""


def read(port: int, gc_log: Path, system_log: Path) -> dict[str, float]:
    """The node's cumulative readings now (names ending ``_total``), its compaction tasks now, and when.

    Raises:
        CountersUnanswered: the node did not answer a query.
        OSError: a log could not be read (the GC log is written from the JVM's start).
    """
    reading: dict[str, float] = {"reading_s": time.monotonic()}
    thread_pools, cache_rows, compaction_rows = _ask(port, [_THREAD_POOLS, _CACHES, _COMPACTIONS])
    pools = {str(row["name"]): row for row in thread_pools}
    caches = {str(row["name"]): row for row in cache_rows}
    compactions = compaction_rows[0]
    compaction = pools.get("CompactionExecutor", {})
    reading["compaction_tasks_now"] = float(_number(compaction.get("active_tasks"))
                                            + _number(compaction.get("pending_tasks")))
    reading["flushes_total"] = float(sum(_number(row["completed_tasks"]) for name, row in pools.items()
                                         if name.startswith("PerDiskMemtableFlushWriter")))
    counts = list(compactions.values())
    reading["compactions_total"] = float(_number(counts[0]))
    reading["compacted_bytes_total"] = float(_number(counts[1]))
    for cache in ("keys", "rows"):
        if cache in caches:
            reading[f"{cache}_hits_total"] = float(_number(caches[cache]["hit_count"]))
            reading[f"{cache}_requests_total"] = float(_number(caches[cache]["request_count"]))
    gc_text = gc_log.read_text(errors="replace")
    reading["gc_pause_s_total"] = sum(float(ms) for ms in _GC_PAUSE.findall(gc_text)) / 1000
    if heaps := [int(size) * _HEAP_UNIT[unit] for size, unit in _GC_HEAP.findall(gc_text)]:
        reading["heap_used_peak_bytes"] = float(max(heaps))  # since the node started (each run starts its own)
    reading.update(_from_system_log(system_log.read_text(errors="replace") if system_log.exists() else ""))
    return reading


def over_run(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """The run's counters (the names ``counters.toml`` describes) from two readings of ``read``."""
    def grew(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    seconds = after["reading_s"] - before["reading_s"]
    run = {"pending_compactions_end": after["compaction_tasks_now"],
           "compactions_completed": grew("compactions_total"), "compacted_bytes": grew("compacted_bytes_total"),
           "memtable_flushes": grew("flushes_total"), "memtable_switches": grew("switches_total"),
           "memtable_switches_commitlog_full": grew("commitlog_switches_total"),
           "gc_pause_s": grew("gc_pause_s_total"),
           "dropped_mutations": grew("dropped_mutations_total"), "dropped_reads": grew("dropped_reads_total")}
    if "heap_used_peak_bytes" in after:
        run["heap_used_peak_bytes_end"] = after["heap_used_peak_bytes"]
    if seconds > 0:
        run["gc_pause_share"] = run["gc_pause_s"] / seconds
    for cache, name in (("keys", "key_cache_hit_ratio"), ("rows", "row_cache_hit_ratio")):
        if f"{cache}_requests_total" in after and (requests := grew(f"{cache}_requests_total")) > 0:
            run[name] = grew(f"{cache}_hits_total") / requests  # none asked (a cache switched off): no ratio
    return {name: value for name, value in run.items() if math.isfinite(value)}


def _ask(port: int, queries: list[str], timeout_s: float = TIMEOUT_S) -> list[list[dict[str, object]]]:
    """The rows of each query (consistency ONE), each a dict by column name, over one session on 127.0.0.1:``port``
    that is shut down before this returns, with its connections and threads (the driver's one event-loop thread
    stays for the process, idle: the driver keeps it for every session and ends it at exit).

    The driver is imported here, once per process (0.05 s with numpy loaded, 0.2-0.6 s alone), so commands that
    never read a node's counters do not pay for it; its log is silenced (a failure reaches the caller as the
    exception).

    Raises:
        CountersUnanswered: no node answers on the port, or it refused or did not answer a query in time.
    """
    from cassandra import ConsistencyLevel, DriverException, ProtocolVersion
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
    from cassandra.connection import ConnectionException
    from cassandra.policies import WhiteListRoundRobinPolicy
    from cassandra.protocol import ErrorMessage
    from cassandra.query import dict_factory

    logging.getLogger("cassandra").setLevel(logging.CRITICAL)  # protocol downgrades, retries, a host marked down
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.0.1"]),
                               consistency_level=ConsistencyLevel.ONE, request_timeout=timeout_s,
                               row_factory=dict_factory)
    cluster = Cluster(["127.0.0.1"], port=port, protocol_version=ProtocolVersion.V5, compression=False,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile}, executor_threads=1,
                      connect_timeout=timeout_s, control_connection_timeout=timeout_s,
                      schema_metadata_enabled=False, token_metadata_enabled=False, monitor_reporting_enabled=False)
    try:
        session = cluster.connect()
        return [list(session.execute(query)) for query in queries]
    except (NoHostAvailable, DriverException, ConnectionException, ErrorMessage, OSError) as exc:
        raise CountersUnanswered(f"the Cassandra node on 127.0.0.1:{port} did not answer a query of its counters "
                                 f"({type(exc).__name__}: {exc}). Fix: check that the node runs; "
                                 "see its system.log") from None
    finally:
        cluster.shutdown()


def _from_system_log(text: str) -> dict[str, float]:
    """Memtable switches (all, and those a full commit log forced) and dropped mutations and reads, as logged."""
    reasons = _SWITCH.findall(text)
    dropped = {"MUTATION_REQ": 0, "READ_REQ": 0}
    for verb, internal, cross_node in _DROPPED.findall(text):
        dropped[verb] += int(internal) + int(cross_node)
    return {"switches_total": float(len(reasons)),
            "commitlog_switches_total": float(sum(reason == "COMMITLOG_DIRTY" for reason in reasons)),
            "dropped_mutations_total": float(dropped["MUTATION_REQ"]),
            "dropped_reads_total": float(dropped["READ_REQ"])}


def _number(value: object) -> float:
    """A count from a CQL row (None, a null sum over no rows, is 0)."""
    return float(value) if isinstance(value, (int, float)) else 0.0
