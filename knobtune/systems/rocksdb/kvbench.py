"""RocksDB through kvbench.

Asked (``ticker_counters=True``), kvbench keeps RocksDB's tickers (a ``Statistics`` object, about 6% of a point
read's instructions: docs/rocksdb.md, "Counters") for the counters only they give: block cache, bloom filter and
memtable counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.knobs import Catalog, Value
from knobtune.drivers.kvbench import KVBENCH_CONFIG, KvbenchTarget
from knobtune.systems.rocksdb.formats import DB_BENCH_FLAGS_KVBENCH, ROCKSDB_OPTIONS_KVBENCH
from knobtune.workloads import Rung, Workload


class RocksdbKvbenchTarget(KvbenchTarget):
    # the OPTIONS file as kvbench opened the store; db_bench's flags with that file beside them
    driver_formats = (ROCKSDB_OPTIONS_KVBENCH, DB_BENCH_FLAGS_KVBENCH, KVBENCH_CONFIG)

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, ticker_counters: bool = False,
                 **options: Any) -> None:
        """``ticker_counters=True`` has kvbench keep RocksDB's tickers (at a cost) for the counters only they give."""
        super().__init__(catalog, workload, scratch_dir, **options)
        self.ticker_counters = ticker_counters

    def spec(self, config: Mapping[str, Value], rung: Rung, seed: int) -> dict[str, Any]:
        return {**super().spec(config, rung, seed), "statistics": self.ticker_counters}
