"""PGTune for PostgreSQL, computed for one machine: the heuristic PostgreSQL users start from.

The rules are data (``pgtune.toml``, read by ``pgtune_rules.py``). This module
applies them to a ``Machine`` and fits the result to the knob catalog: its
names, units (bytes, seconds) and ranges. It runs no process.
"""

from __future__ import annotations

from collections.abc import Mapping

from knobtune import schema
from knobtune.errors import UsageError
from knobtune.knobs.catalog import Catalog, Knob, KnobType, Value, load_catalog
from knobtune.units import human_bytes
from knobtune.targets import KIB, HeuristicConfig, Machine, clamp_into_range
from knobtune.systems.postgresql.pgtune_rules import Profile, Pgtune, Rules, load_pgtune

# PGTune's settings that are sizes (PGTune computes them in kB); spelled in kB/MB/GB when reported.
_SIZES = frozenset({"shared_buffers", "effective_cache_size", "maintenance_work_mem", "min_wal_size",
                    "max_wal_size", "wal_buffers", "work_mem", "autovacuum_work_mem"})


def compute(name: str, machine: Machine, profile: str | None) -> HeuristicConfig:
    """What `knobtune baseline postgresql` computes: PGTune (its one config, ``name``) for ``machine``.

    Raises:
        UsageError: ``profile`` is missing or not one of PGTune's.
    """
    if profile is None:
        raise UsageError("PGTune needs the database type. Fix: add --profile web, oltp, dw, desktop or mixed")
    return pgtune_config(machine, profile)


def pgtune(machine: Machine, profile: str) -> dict[str, Value]:
    """PGTune's config for ``machine`` in our PostgreSQL catalog's names, units and ranges.

    Raises:
        UsageError: ``profile`` is not web, oltp, dw, desktop or mixed.
    """
    return dict(pgtune_config(machine, profile).config)


def pgtune_config(machine: Machine, profile: str, rules: Pgtune | None = None) -> HeuristicConfig:
    """PGTune's config with the notes: max_connections, values clamped, settings the catalog lacks.

    Raises:
        UsageError: ``profile`` is not one of the rules' profiles.
        CatalogError: the rules file is invalid.
    """
    rules = rules or load_pgtune()
    chosen = rules.profile(profile)
    connections = machine.connections or chosen.max_connections
    catalog = load_catalog("postgresql")
    notes = [_connections_note(connections, profile, machine)] + _memory_warnings(rules.rules, machine)
    config = _fit(_pgtune_settings(rules, chosen, machine, connections), catalog, notes)
    catalog.config(config)  # every value fits; a broken relation would be a bug in the rules
    return HeuristicConfig("postgresql", "pgtune", profile, machine, connections, config, tuple(notes),
                           schema.to_dict(rules.source))


def _pgtune_settings(rules: Pgtune, profile: Profile, machine: Machine, connections: int) -> dict[str, Value]:
    """Every setting PGTune writes, in PostgreSQL's names; sizes in bytes, computed in kB as PGTune does."""
    common, disk = rules.rules, rules.disks[machine.disk]
    memory_kb = machine.memory_bytes // KIB
    shared_kb = _share_kb(memory_kb, profile.shared_buffers)
    maintenance_kb = min(_share_kb(memory_kb, profile.maintenance_work_mem),
                         common.maintenance_work_mem_cap_bytes // KIB)
    parallel = _parallel(common, profile, machine.cpus)
    workers = parallel.get("max_worker_processes", common.default_worker_processes)
    settings: dict[str, Value] = {
        "shared_buffers": shared_kb * KIB,
        "huge_pages": "try" if shared_kb * KIB >= common.huge_pages_try_from_bytes else "off",
        "effective_cache_size": _share_kb(memory_kb, profile.effective_cache_size) * KIB,
        "maintenance_work_mem": maintenance_kb * KIB,
        "min_wal_size": profile.min_wal_size,
        "max_wal_size": profile.max_wal_size,
        "checkpoint_completion_target": common.checkpoint_completion_target,
        "wal_buffers": _wal_buffers_kb(common, shared_kb) * KIB,
        "default_statistics_target": profile.default_statistics_target,
        "random_page_cost": disk.random_page_cost if profile.random_page_cost is None else profile.random_page_cost,
        "effective_io_concurrency": disk.effective_io_concurrency,
        "work_mem": _work_mem_kb(common, profile, memory_kb - shared_kb, connections + workers) * KIB,
        "wal_compression": common.wal_compression,
    }
    if profile.jit is not None:
        settings["jit"] = profile.jit
    return settings | parallel | _autovacuum(common, machine.cpus, maintenance_kb) | dict(profile.outside_catalog)


def _share_kb(memory_kb: int, fraction: tuple[int, ...]) -> int:
    numerator, denominator = fraction
    return memory_kb * numerator // denominator


def _wal_buffers_kb(rules: Rules, shared_kb: int) -> int:
    """3% of shared_buffers, at most 16 MiB, rounded up to 16 MiB above 14 MiB, at least 32 KiB."""
    most_kb = rules.wal_buffers_max_bytes // KIB
    value = min(rules.wal_buffers_percent * shared_kb // 100, most_kb)
    if rules.wal_buffers_round_up_above_bytes // KIB < value < most_kb:
        value = most_kb
    return max(value, rules.wal_buffers_min_bytes // KIB)


def _work_mem_kb(rules: Rules, profile: Profile, free_kb: int, sessions: int) -> int:
    """(RAM - shared_buffers) / (sessions x 3), divided by the profile's divisor, floored; at least 4 MiB."""
    share = free_kb // (sessions * rules.work_mem_sessions_factor * profile.work_mem_divisor)
    return max(share, rules.work_mem_min_bytes // KIB)


def _parallel(rules: Rules, profile: Profile, cpus: int) -> dict[str, int]:
    """The parallel settings, only with enough CPUs: all of them as workers, half of them per query."""
    if cpus < rules.parallel_from_cpus:
        return {}
    half = (cpus + 1) // 2
    per_gather = min(half, rules.parallel_workers_cap) if profile.cap_workers_per_gather else half
    return {"max_worker_processes": cpus, "max_parallel_workers_per_gather": per_gather,
            "max_parallel_workers": cpus, "max_parallel_maintenance_workers": min(half, rules.parallel_workers_cap)}


def _autovacuum(rules: Rules, cpus: int, maintenance_kb: int) -> dict[str, Value]:
    settings: dict[str, Value] = {}
    workers = next((value for at_least, value in rules.autovacuum_max_workers if cpus >= at_least), None)
    if workers is not None:
        settings["autovacuum_max_workers"] = workers
    if maintenance_kb * KIB >= rules.autovacuum_work_mem_bytes:
        settings["autovacuum_work_mem"] = rules.autovacuum_work_mem_bytes
    return settings


def _connections_note(connections: int, profile: str, machine: Machine) -> str:
    given = "--connections" if machine.connections else f"PGTune's for {profile}; --connections N to change"
    return (f"max_connections = {connections} ({given}) enters work_mem but is not a knob of the catalog: "
            "the scratch server keeps PostgreSQL's 100, enough for pgbench's clients")


def _memory_warnings(rules: Rules, machine: Machine) -> list[str]:
    if machine.memory_bytes < rules.memory_warning_below_bytes:
        return [f"PGTune warns its rules are not optimal below {human_bytes(rules.memory_warning_below_bytes)}"]
    if machine.memory_bytes > rules.memory_warning_above_bytes:
        return [f"PGTune warns its rules are not optimal above {human_bytes(rules.memory_warning_above_bytes)}"]
    return []


# ---------------------------------------------------------------- fitting to the catalog


def _fit(settings: Mapping[str, Value], catalog: Catalog, notes: list[str]) -> dict[str, Value]:
    """The settings the catalog has, in its types and clamped into its ranges; a note for each left out or clamped."""
    config: dict[str, Value] = {}
    for name, value in settings.items():
        knob = catalog.knobs.get(name)
        if knob is None:
            notes.append(f"PGTune also sets {name} = {_postgres_spelling(name, value)}; "
                         "the catalog has no such knob: left out")
        elif knob.type is KnobType.ENUM and value not in knob.choices:
            notes.append(f"PGTune sets {name} = {value}, not one of {', '.join(knob.choices)}: left out")
        else:
            config[name] = clamp_into_range(knob, _typed(knob, value), notes, "PGTune")
    return config


def _typed(knob: Knob, value: Value) -> Value:
    if knob.type is KnobType.FLOAT:
        return float(value)
    if knob.type in (KnobType.INT, KnobType.BYTES):
        return int(value)
    return value


def _postgres_spelling(name: str, value: Value) -> str:
    """A value as postgresql.conf takes it; sizes in GB, MB or kB as PGTune writes them."""
    if name not in _SIZES or not isinstance(value, int):
        return str(value).lower() if isinstance(value, bool) else str(value)
    kb = value // KIB
    for unit, size_kb in (("GB", KIB * KIB), ("MB", KIB)):
        if kb % size_kb == 0:
            return f"{kb // size_kb}{unit}"
    return f"{kb}kB"
