"""PostgreSQL's own counters over a run: checkpoints, who wrote the buffers, cache hits, temp files, WAL.

Read from the statistics views (PostgreSQL 15: ``pg_stat_bgwriter``,
``pg_stat_database``, ``pg_stat_wal``) right after the server started and
right after the benchmark, before the settle kills it; the run's counters are
the differences. Two psql calls per run, outside the measured time. Every
counter a run gives (these, and the wait events of ``waits.py``) is described
in ``counters.toml``: its meaning, unit and where it is read (``described``).
"""

from __future__ import annotations

from collections.abc import Mapping



# name -> the SQL expression that reads it (cumulative since the statistics were last reset)
COUNTERS: Mapping[str, str] = {
    "checkpoints_timed": "(SELECT checkpoints_timed FROM pg_stat_bgwriter)",
    "checkpoints_requested": "(SELECT checkpoints_req FROM pg_stat_bgwriter)",
    "buffers_written_by_checkpoints": "(SELECT buffers_checkpoint FROM pg_stat_bgwriter)",
    "buffers_written_by_bgwriter": "(SELECT buffers_clean FROM pg_stat_bgwriter)",
    "buffers_written_by_backends": "(SELECT buffers_backend FROM pg_stat_bgwriter)",
    "bgwriter_stopped_at_limit": "(SELECT maxwritten_clean FROM pg_stat_bgwriter)",
    "blocks_hit": "(SELECT sum(blks_hit) FROM pg_stat_database)",
    "blocks_read": "(SELECT sum(blks_read) FROM pg_stat_database)",
    "temp_files": "(SELECT sum(temp_files) FROM pg_stat_database)",
    "temp_bytes": "(SELECT sum(temp_bytes) FROM pg_stat_database)",
    "deadlocks": "(SELECT sum(deadlocks) FROM pg_stat_database)",
    "wal_bytes": "(SELECT wal_bytes FROM pg_stat_wal)",
    "wal_buffers_full": "(SELECT wal_buffers_full FROM pg_stat_wal)",
}

QUERY = "SELECT " + ", ".join(f"coalesce({sql}, 0)" for sql in COUNTERS.values())


def parse(line: str) -> dict[str, float]:
    """The counters from psql's unaligned answer to ``QUERY`` (fields separated by ``|``)."""
    values = line.strip().split("|")
    if len(values) != len(COUNTERS):
        raise ValueError(f"expected {len(COUNTERS)} counters, read {line.strip()!r}")
    return {name: float(value) for name, value in zip(COUNTERS, values)}


def over_run(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What the run added to each counter, and the share of reads the buffer cache served."""
    run = {name: after[name] - before.get(name, 0.0) for name in after}
    reads = run.get("blocks_hit", 0.0) + run.get("blocks_read", 0.0)
    if reads > 0:
        run["cache_hit_ratio"] = run["blocks_hit"] / reads
    return run
