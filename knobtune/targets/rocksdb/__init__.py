"""RocksDB: through its own db_bench (the default) or knobtune's kvbench; its formats and known configs."""

from pathlib import Path

from knobtune.targets._system import Heuristics, System
from knobtune.targets.rocksdb import known
from knobtune.targets.rocksdb.db_bench import DbBenchTarget
from knobtune.targets.rocksdb.formats import FORMATS
from knobtune.targets.rocksdb.kvbench import RocksdbKvbenchTarget

HERE = Path(__file__).parent
SYSTEM = System("rocksdb", "db_bench", {"db_bench": DbBenchTarget, "kvbench": RocksdbKvbenchTarget}, FORMATS,
                Heuristics((known.GUIDE, *known.PUBLISHED), known.compute),
                rules=HERE / "rules.toml", counters=HERE / "counters.toml")
