"""PostgreSQL's own formats: a postgresql.conf include file and ALTER SYSTEM statements, both with units."""

from __future__ import annotations

from collections.abc import Mapping

from knobtune.knobs import Catalog, Value
from knobtune.targets import ExportFormat, settings_with_units


def postgresql_settings(catalog: Catalog, config: Mapping[str, Value]) -> dict[str, str]:
    """The changed settings as PostgreSQL reads them, with units: sizes in kB, times in ms, booleans on/off.

    A bare number would be read in the setting's own base unit (8 kB pages for shared_buffers), so every
    size and time carries its unit; a special value (-1 = auto) is written as it is.
    """
    return settings_with_units(catalog, config, "postgresql", lambda knob, size: f"{max(size // 1024, 1)}kB",
                               ("on", "off"), plain_specials=True)


def _postgresql_conf(catalog: Catalog, config: Mapping[str, Value]) -> str:
    lines = ["# PostgreSQL settings written by knobtune; include this file from postgresql.conf:",
             "#   include 'knobtune.conf'"]
    lines += [f"{name} = '{text}'" for name, text in postgresql_settings(catalog, config).items()]
    return "\n".join(lines) + "\n"


def _alter_system(catalog: Catalog, config: Mapping[str, Value]) -> str:
    settings = postgresql_settings(catalog, config)
    restart = sorted(n for n in settings if catalog.knobs[n].restart)
    lines = ["-- PostgreSQL settings written by knobtune: run with psql as a superuser."]
    lines += [f"ALTER SYSTEM SET {name} = '{text}';" for name, text in settings.items()]
    lines.append("SELECT pg_reload_conf();")
    if restart:
        lines.append(f"-- these take effect only after a restart: {', '.join(restart)}")
    return "\n".join(lines) + "\n"


POSTGRESQL_CONF = ExportFormat("postgresql-conf", "a postgresql.conf include file, with units", "#", _postgresql_conf)
ALTER_SYSTEM = ExportFormat("alter-system", "ALTER SYSTEM statements for psql", "--", _alter_system)
FORMATS = (POSTGRESQL_CONF, ALTER_SYSTEM)
