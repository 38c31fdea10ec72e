"""Every module of knobtune imports: the quick lane (`scripts/test -m "not slow"`) touches each one, including the
modules only the full suite runs."""

from __future__ import annotations

import importlib
import pkgutil

import knobtune


def test_every_module_imports() -> None:
    names = [m.name for m in pkgutil.walk_packages(knobtune.__path__, "knobtune.") if m.name != "knobtune.cli.__main__"]
    assert len(names) > 100 and "knobtune.systems.cassandra.target" in names
    for name in names:
        importlib.import_module(name)
