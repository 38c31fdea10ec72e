"""Drivers more than one system runs through: ``embedded`` (one fresh store per run, settled), ``kvbench``
(knobtune's native driver, RocksDB and LevelDB) with ``kvbench_phases`` (its workload section checked), and
``replay`` (what every system's replay of a capture shares).

A system's own drivers (db_bench, pgbench, YCSB) live in its folder under ``knobtune/systems/``.
"""
