"""Knob catalogs (data files, one per system) and the code that reads and renders them.

Nothing here runs a process or knows an optimizer.
"""

from knobtune.knobs.catalog import (
    Catalog,
    Condition,
    Implication,
    Knob,
    KnobType,
    Relation,
    Safety,
    Value,
    available_systems,
    load_catalog,
)
from knobtune.knobs.render import check_driver, render_flags, render_named, spell_value

__all__ = [
    "Catalog", "Condition", "Implication", "Knob", "KnobType", "Relation", "Safety", "Value",
    "available_systems", "check_driver", "load_catalog", "render_flags", "render_named", "spell_value",
]
