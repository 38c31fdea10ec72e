"""RocksDB through kvbench: kvbench's runs, with RocksDB's starts for a workload that reads single keys only."""

from __future__ import annotations

from knobtune.targets._base import KnownConfig
from knobtune.targets._kvbench import KvbenchTarget
from knobtune.targets.rocksdb.known import point_lookup_configs


class RocksdbKvbenchTarget(KvbenchTarget):
    def point_lookup_configs(self) -> tuple[KnownConfig, ...]:
        return point_lookup_configs(self.catalog, self.workload)
