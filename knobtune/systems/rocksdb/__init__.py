"""RocksDB: through its own db_bench (the default) or knobtune's kvbench, or replaying a capture of an application's
own work (a trace); its formats and known configs."""

from pathlib import Path

from knobtune.targets import Heuristics, System
from knobtune.systems.rocksdb import known
from knobtune.systems.rocksdb.capture import CAPTURING
from knobtune.systems.rocksdb.db_bench import DbBenchTarget
from knobtune.systems.rocksdb.formats import FORMATS
from knobtune.systems.rocksdb.kvbench import RocksdbKvbenchTarget
from knobtune.systems.rocksdb.replay import RocksdbReplayTarget

HERE = Path(__file__).parent
SYSTEM = System("rocksdb", "db_bench",
                {"db_bench": DbBenchTarget, "kvbench": RocksdbKvbenchTarget, "replay": RocksdbReplayTarget}, FORMATS,
                Heuristics((known.GUIDE, *known.PUBLISHED), known.compute),
                rules=HERE / "rules.toml", counters=HERE / "counters.toml", capturing=CAPTURING)
