"""kvbench runs the catalog's config, defaults included: RocksDB, left alone, would run its library's defaults where
the catalog holds db_bench's (``enable_pipelined_write``, ``table_cache_numshardbits``, ...). Read back from the
OPTIONS file RocksDB writes into the store and the block cache it logged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knobtune.knobs import load_catalog, render_every
from knobtune.targets import Measurement
from knobtune.drivers.kvbench import KvbenchTarget
from knobtune.systems.rocksdb.formats import block_cache_logged
from knobtune.workloads import Rung

from conftest import tiny

# Where db_bench's default (the catalog's) is not RocksDB's own (RocksDB's in brackets).
NOT_THE_LIBRARYS = {"enable_pipelined_write": "true",  # (false)
                    "hard_pending_compaction_bytes_limit": "137438953472",  # (256 GiB)
                    "table_cache_numshardbits": "4",  # (6)
                    "delayed_write_rate": "8388608"}  # (0: 16 MiB/s)


class _KeepsTheStore(KvbenchTarget):
    """The real kvbench target, which also copies the store's OPTIONS and LOG files before the run's store is
    removed."""

    kept: Path

    def checked(self, measurement: Measurement, rung: Rung, db_dir: Path, log_path: Path) -> Measurement:
        self.kept.mkdir(parents=True, exist_ok=True)
        for path in [*db_dir.glob("OPTIONS-*"), db_dir / "LOG"]:
            shutil.copy(path, self.kept / path.name)
        return super().checked(measurement, rung, db_dir, log_path)


def _options(path: Path) -> dict[str, str]:
    """An OPTIONS file's ``key=value`` lines (every section; the keys a study sets are unique across them)."""
    return dict(line.strip().split("=", 1) for line in path.read_text().splitlines()
                if "=" in line and not line.lstrip().startswith("#"))


def _same(held: str, sent: str) -> bool:
    try:
        return float(held) == float(sent)
    except ValueError:
        return held == sent


@pytest.mark.parametrize("changes", [{}, {"write_buffer_size": "8MiB", "cache_index_and_filter_blocks": True}])
def test_a_kvbench_run_holds_the_catalogs_defaults(changes: dict, tmp_path: Path) -> None:
    catalog = load_catalog("rocksdb")
    workload = tiny("put-get-delete", 2000)
    target = _KeepsTheStore(catalog, workload, tmp_path / "scratch", settle=False)
    target.kept = tmp_path / "kept"
    config = catalog.config(changes)
    with target:
        target.run(config, workload.full, timeout_s=120, log_path=tmp_path / "run.log", seed=3)
    held = _options(sorted(target.kept.glob("OPTIONS-*"))[-1])

    for name, value in NOT_THE_LIBRARYS.items():
        assert held[name] == value, f"{name}: RocksDB held {held[name]}, the catalog's default is {value}"
    cache = block_cache_logged((target.kept / "LOG").read_text())
    assert cache is not None and cache["capacity"] == "8388608" and cache["high_pri_pool_ratio"] == "0.000", \
        "the block cache as db_bench builds it (RocksDB's own NewLRUCache holds 0.5 for high priority)"
    sent = render_every(catalog, config, "kvbench")
    compared = [name for name in sent if name in held]
    assert len(compared) >= 35, "most knobs are RocksDB options the OPTIONS file holds"
    assert [name for name in compared if not _same(held[name], sent[name])] == []
