"""PostgreSQL's wait events while a run goes: what the busy backends were waiting on, sampled from pg_stat_activity.

One psql child, started just before the benchmark and stopped right after,
runs one query every ``INTERVAL_S`` (psql's ``\\watch``): the client backends
that are active (running a statement), each as its wait event
(``wait_event_type:wait_event``), or ``CPU:CPU`` when it waits on nothing.
psql prints one line per sample into the sampler's log; the run's counters
are read from that log when the sampler stops (``counters``): how many
active-backend samples there were, and which share of them each kind of wait
took. The sampler is argv only, in its own process group, dying with
knobtune (``server.process.spawn``), and stopped in ``finally`` by the caller.
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from knobtune.targets import FailureKind, RunFailure
from knobtune.server.process import last_lines, spawn, stop_group
from knobtune.systems.postgresql.server import PG_BIN

INTERVAL_S = 0.25  # between two samples
STOP_WAIT_S = 5.0  # psql may take this long to end after SIGINT before it is killed
MARK = "sample|"  # every sample's line starts so; anything else in the log is psql's own message

SAMPLE_SQL = (
    f"SELECT '{MARK}' || coalesce(string_agg(coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, 'CPU'),"
    " ','), '') FROM pg_stat_activity"
    " WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()"
)

# wait_event_type -> the counter that takes its share; every other type (BufferPin, Timeout, Extension, Activity)
# goes to wait_share_other. The shares of these types sum to 1.
TYPES = {"CPU": "wait_share_cpu", "LWLock": "wait_share_lwlock", "Lock": "wait_share_lock", "IO": "wait_share_io",
         "Client": "wait_share_client", "IPC": "wait_share_ipc"}
OTHER = "wait_share_other"

# the events an expert looks at, each counter the share of the samples spent in any of its events; chosen from what
# TPC-B and TPC-C showed at their shipped sizes here (docs/postgresql.md): waiting for the commit's WAL flush, for
# room in the WAL buffers, for a page from disk, for a table to grow, for the buffer table, for another's row
EVENTS = {
    "wait_share_wal_write": ("IO:WALWrite", "IO:WALSync", "LWLock:WALWrite"),
    "wait_share_wal_insert": ("LWLock:WALInsert", "LWLock:WALBufMapping"),
    "wait_share_data_file_read": ("IO:DataFileRead",),
    "wait_share_relation_extend": ("Lock:extend", "IO:DataFileExtend"),
    "wait_share_buffer_mapping": ("LWLock:BufferMapping",),
    "wait_share_row_lock": ("Lock:transactionid", "Lock:tuple"),
}
NAMES = ("wait_samples", "active_backends_mean", *TYPES.values(), OTHER, *EVENTS)  # every counter this module gives


class WaitSampler:
    """One psql child sampling pg_stat_activity every ``interval_s`` until ``stop``."""

    def __init__(self, connection: list[str], log: Path, interval_s: float = INTERVAL_S) -> None:
        self.connection = connection
        self.log = log
        self.interval_s = interval_s
        self._psql: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        """psql running the sample query under ``\\watch`` (the script written beside the log)."""
        script = self.log.with_suffix(".sql")
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(f"{SAMPLE_SQL}\n\\watch {self.interval_s}\n")
        return [str(PG_BIN / "psql"), "-X", *self.connection, "-tAq", "-f", str(script)]

    def start(self) -> None:
        """Start sampling (the log is overwritten)."""
        self.log.unlink(missing_ok=True)
        self._psql = spawn(self.argv(), log_path=self.log)

    def stop(self) -> dict[str, float]:
        """Stop psql (SIGINT ends ``\\watch``; killed if it lingers) and count what it sampled. Idempotent.

        Raises:
            RunFailure: (TOOL) psql had ended on its own (it could not connect or lost its connection); the caller
                raises it only when the run itself went well.
        """
        psql, self._psql = self._psql, None
        if psql is None:
            return {}
        ended_early = psql.poll() is not None
        stop_group(psql, signal.SIGINT, wait_s=STOP_WAIT_S)
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        if ended_early:
            raise RunFailure(FailureKind.TOOL, f"sampling the wait events failed: psql ended during the run "
                             f"(status {psql.returncode}): {last_lines(text)}", self.log)
        return counters(samples(text))


def samples(text: str) -> list[list[str]]:
    """Each sample psql printed: the active backends' events (``type:event``), empty when none was active."""
    return [[event for event in line[len(MARK):].split(",") if event]
            for line in text.splitlines() if line.startswith(MARK)]


def counters(sampled: Iterable[list[str]]) -> dict[str, float]:
    """``wait_samples`` (active backends over all samples), ``active_backends_mean``, and each wait's share.

    With no active backend sampled (a run shorter than one interval) only the two counts are given.
    """
    polls, events = 0, Counter[str]()
    for sample in sampled:
        polls += 1
        events.update(sample)
    total = sum(events.values())
    result = {"wait_samples": float(total), "active_backends_mean": total / polls if polls else 0.0}
    if total == 0:
        return result
    shares = dict.fromkeys([*TYPES.values(), OTHER], 0.0)
    for event, count in events.items():
        shares[TYPES.get(event.split(":", 1)[0], OTHER)] += count / total
    for name, members in EVENTS.items():
        shares[name] = sum(events[event] for event in members) / total
    return {**result, **shares}


def events_seen(text: str) -> Counter[str]:
    """How often each event was sampled (for reading a sampler's log by hand)."""
    return Counter(event for sample in samples(text) for event in sample)
