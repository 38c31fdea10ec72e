"""Every system knobtune runs, one folder each (``rocksdb/``, ``leveldb/``, ``postgresql/``, ``cassandra/``, and
those described as data only), and the registry that collects them (``_registry.py``).

A system's folder holds its catalog (``catalog.toml``), its diagnosis rules (``rules.toml``), what its counters
mean (``counters.toml``) and, where it has code, its targets, drivers, formats and known configs behind one entry
(``SYSTEM`` in its ``__init__.py``); a folder with a ``system.toml`` instead is run by ``knobtune.described``.
The CLI, tuning and the report ask the functions below; none of them names a system.
"""

from knobtune.systems._registry import (
    SHIPPED_FILES, SYSTEMS, TARGETS, capturing, described_systems, driver_for, export_format, export_formats,
    forget_system_files, heuristic_config, know_system, make_target, reclaim_server_homes, resolve_driver, spelling_of,
    stale_server_homes, target_class, use_system, use_system_file, user_system_file, workload_section,
)

__all__ = ["SHIPPED_FILES", "SYSTEMS", "TARGETS", "capturing", "described_systems", "driver_for", "export_format",
           "export_formats", "forget_system_files", "heuristic_config", "know_system", "make_target",
           "reclaim_server_homes", "resolve_driver", "spelling_of", "stale_server_homes", "target_class", "use_system",
           "use_system_file", "user_system_file", "workload_section"]
