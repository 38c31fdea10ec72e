"""Does kvbench measure the store the way db_bench does, and why is the driver native?

1. RocksDB, default config: db_bench and kvbench run the same workload
   (fillrandom; readrandom over a database filled with every key once),
   interleaved, --repeats times each; the medians of the measured phase's
   operations per second are compared.
2. LevelDB: kvbench's fillrandom against the same writes from Python through
   the plyvel binding (`pip install plyvel`; its wheel bundles LevelDB 1.22),
   to show what a Python driver would measure instead of the store.

    .venv/bin/python bench/faithfulness.py --records 300000 --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.workloads import load_workload


def driver_runs(workload_name: str, records: int, repeats: int, scratch: Path) -> dict[str, list[float]]:
    catalog = load_catalog("rocksdb")
    workload = load_workload(workload_name).scaled(records)
    runs: dict[str, list[float]] = {"db_bench": [], "kvbench": []}
    targets = {driver: make_target(catalog, workload, scratch / driver, driver) for driver in runs}
    for target in targets.values():
        target.open()
    try:
        for repeat in range(repeats):
            for driver, target in targets.items():
                measurement = target.run(catalog.defaults(), workload.full, timeout_s=600, seed=7,
                                         log_path=scratch / "logs" / f"{workload_name}-{driver}-{repeat}.log")
                runs[driver].append(measurement.ops_per_s)
    finally:
        for target in targets.values():
            target.close()
    return runs


def plyvel_fillrandom(records: int, path: Path) -> float:
    import plyvel

    rng = random.Random(7)
    value = bytes(rng.getrandbits(8) for _ in range(50)) + b"x" * 50
    keys = [rng.randrange(records).to_bytes(8, "big") + b"0" * 12 for _ in range(records)]
    db = plyvel.DB(str(path), create_if_missing=True)
    started = time.perf_counter()
    for key in keys:
        db.put(key, value)
    elapsed = time.perf_counter() - started
    db.close()
    shutil.rmtree(path, ignore_errors=True)
    return records / elapsed


def leveldb_runs(records: int, repeats: int, scratch: Path) -> dict[str, list[float]]:
    catalog = load_catalog("leveldb")
    workload = load_workload("fillrandom").scaled(records)
    runs: dict[str, list[float]] = {"kvbench": [], "python (plyvel)": []}
    with make_target(catalog, workload, scratch / "leveldb", "kvbench") as target:
        for repeat in range(repeats):
            runs["kvbench"].append(target.run(catalog.defaults(), workload.full, timeout_s=600, seed=7,
                                              log_path=scratch / "logs" / f"leveldb-{repeat}.log").ops_per_s)
            runs["python (plyvel)"].append(plyvel_fillrandom(records, scratch / "plyvel-db"))
    return runs


def describe(title: str, runs: dict[str, list[float]]) -> str:
    (first, a), (second, b) = runs.items()
    ratio = statistics.median(b) / statistics.median(a)
    spread = {name: f"median {statistics.median(v):,.0f} ops/s (min {min(v):,.0f}, max {max(v):,.0f})"
              for name, v in runs.items()}
    return (f"{title}\n  {first}: {spread[first]}\n  {second}: {spread[second]}\n"
            f"  {second}/{first}: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="knobtune-faithfulness-") as tmp:
        scratch = Path(tmp)
        for workload in ("fillrandom", "readrandom"):
            print(describe(f"RocksDB {workload}, {args.records:,} records, default config, "
                           f"{args.repeats} interleaved runs each",
                           driver_runs(workload, args.records, args.repeats, scratch)), flush=True)
        if importlib.util.find_spec("plyvel") is None:
            print("LevelDB through Python: skipped (pip install plyvel)")
            return
        print(describe(f"LevelDB fillrandom, {args.records:,} records, {args.repeats} interleaved runs each",
                       leveldb_runs(args.records, args.repeats, scratch)), flush=True)


if __name__ == "__main__":
    main()
