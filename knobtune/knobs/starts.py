"""Configs a new study tries first because of its workload's shape, not its machine.

``baselines/rocksdb-point-lookups.toml`` holds RocksDB's: for a workload that
reads single keys and never scans, the data set held in a hash memtable, with
and without universal compaction (the file says where it comes from and what
it measured). The file is data: its ``[config]`` is shared, each ``[data_sized]``
knob is a fraction of the workload's data set, and each of its ``[variants]``
is one start. Which workloads read single keys only is the target's to say.
Nothing here runs a process.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, KnobtuneError
from knobtune.knobs.baseline import BASELINE_DIR
from knobtune.knobs.catalog import Catalog, Value

POINT_LOOKUP_STARTS = {"rocksdb": "rocksdb-point-lookups"}  # system -> its file of starts for point lookups


def point_lookup_starts(catalog: Catalog, data_bytes: int, key_size: int) -> dict[str, dict[str, Value]]:
    """The starts for a workload of ``data_bytes`` (records x (key + value)) whose keys are ``key_size`` bytes,
    as label -> changed knobs; none for a system without such a file, or for keys shorter than the prefix the
    file's memtable hashes.

    Raises:
        CatalogError: the file names a knob the catalog lacks, a value or a fraction it refuses.
    """
    name = POINT_LOOKUP_STARTS.get(catalog.system)
    if name is None:
        return {}
    path = BASELINE_DIR / f"{name}.toml"
    data = _read(path)
    shared = dict(data.get("config", {}))
    if key_size < int(shared.get("prefix_size", 0)):
        return {}
    try:
        sized = {knob: _data_sized(catalog, knob, fraction, data_bytes)
                 for knob, fraction in data.get("data_sized", {}).items()}
        return {label: catalog.changed(catalog.config({**shared, **sized, **own}))
                for label, own in data["variants"].items()}
    except (KnobtuneError, KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"{path}: {exc}. Fix: use the {catalog.system} catalog's knob names and value types, "
                           "fractions between 0 and 1 under [data_sized], and at least one [variants] table") from None


def point_lookup_source(system: str) -> str:
    """Where ``system``'s point-lookup starts come from: their file, and the page their source table names."""
    name = POINT_LOOKUP_STARTS.get(system)
    if name is None:
        return ""
    page = _read(BASELINE_DIR / f"{name}.toml").get("source", {}).get("page", "")
    return f"knobtune/knobs/baselines/{name}.toml" + (f" ({page})" if page else "")


def _data_sized(catalog: Catalog, name: str, fraction: Any, data_bytes: int) -> int:
    """``fraction`` of the data set for knob ``name``, never below its default nor above its range."""
    knob = catalog[name]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"[data_sized] {name} = {fraction!r} is not a fraction of the data set in (0, 1]")
    wanted = max(int(fraction * data_bytes), int(knob.default))
    return min(wanted, int(knob.max)) if knob.max is not None else wanted


@lru_cache(maxsize=None)
def _read(path: Path) -> dict[str, Any]:
    return read_toml(path, CatalogError, "starting configs")
