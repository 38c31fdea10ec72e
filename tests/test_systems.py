"""Every registered system's entry is complete: its default driver is one of its targets, each of its formats (and
each driver's) renders its defaults and a changed config, its heuristics name themselves, and every catalog has one."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.knobs import available_systems, load_catalog
from knobtune.targets import Machine, System, Target
from knobtune.systems import SYSTEMS, TARGETS, described_systems, export_formats, heuristic_config

ENTRIES = sorted(SYSTEMS.values(), key=lambda entry: entry.name)
_NEEDS_DB_BENCH = {"rocksdb-options"}  # rendered by RocksDB itself through db_bench


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.name for entry in ENTRIES])
def test_an_entry_is_complete(entry: System) -> None:
    assert isinstance(entry, System) and entry.name in available_systems()
    assert entry.default_driver in entry.targets
    for driver, target in entry.targets.items():
        assert issubclass(target, Target) and target.driver == driver and TARGETS[(entry.name, driver)] is target
    if entry.heuristics is not None:
        assert entry.heuristics.names and len(set(entry.heuristics.names)) == len(entry.heuristics.names)


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.name for entry in ENTRIES])
def test_each_format_renders_the_defaults(entry: System) -> None:
    catalog = load_catalog(entry.name)
    for driver in entry.targets:
        formats = export_formats(entry.name, driver)
        names = [f.name for f in formats]
        assert names[:len(entry.formats)] == [f.name for f in entry.formats], "the system's own come first"
        assert len({f.name for f in formats}) == len(formats)
        for candidate in formats:
            if candidate.name in _NEEDS_DB_BENCH and TARGETS[("rocksdb", "db_bench")].installed() is None:
                continue
            text = candidate.render(catalog, catalog.defaults())
            assert isinstance(text, str) and text.endswith("\n"), candidate.name
            assert candidate.comment is None or text.startswith(candidate.comment) or not text.strip(), candidate.name


def test_every_catalog_has_a_system_and_the_described_ones_are_the_shipped_system_files() -> None:
    assert sorted(SYSTEMS) == sorted(available_systems())
    systems_dir = Path(__file__).resolve().parents[1] / "knobtune" / "systems"
    shipped = sorted(p.parent.name for p in systems_dir.glob("*/system.toml"))
    assert sorted(s.name for s in described_systems()) == shipped == ["mariadb"]


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.heuristics], ids=[e.name for e in ENTRIES if e.heuristics])
def test_the_default_heuristic_computes(entry: System) -> None:
    assert entry.heuristics is not None
    first = entry.heuristics.names[0]
    profile = "oltp" if entry.name == "postgresql" else None
    result = heuristic_config(entry.name, Machine(8 << 30, 2), profile)
    assert result.name == first and result.config and result.source
    load_catalog(entry.name).config(result.config)  # every value fits the catalog


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.name for entry in ENTRIES])
def test_a_system_keeps_its_data_in_its_own_folder(entry: System) -> None:
    """knobtune/systems/NAME/ holds the system's catalog, rules and counters (docs/targets.md, "Adding a built-in
    system"); a system with code holds its targets there too, a described one its system file."""
    folder = Path(__file__).resolve().parents[1] / "knobtune" / "systems" / entry.name
    assert load_catalog(entry.name).source.resolve() == folder / "catalog.toml"
    assert entry.rules is not None and entry.rules.resolve() == folder / "rules.toml" and entry.rules.is_file()
    assert entry.counters is not None and entry.counters.resolve() == folder / "counters.toml"
    assert entry.counters.is_file()
    own = (folder / "__init__.py").is_file()
    assert own != (folder / "system.toml").is_file(), "a system is either a package or a system file"
    if own:
        assert all(target.__module__.startswith(f"knobtune.systems.{entry.name}.")
                   or target.__module__.startswith("knobtune.drivers.") for target in entry.targets.values())
