"""Knob catalogs (data files, one per system) and the code that reads and renders them.

knob.py (one knob), model.py (a catalog: knobs, relations, implications), memory.py (its memory model),
catalog.py (the TOML file and its validation), render.py (a config as a system spells it).

Nothing here runs a process or knows an optimizer.
"""

from knobtune.knobs.catalog import available_systems, load_catalog
from knobtune.knobs.knob import Condition, Knob, KnobType, Safety, Value, as_number
from knobtune.knobs.model import Catalog, Implication, Relation
from knobtune.knobs.render import check_driver, render_every, render_flags, render_named, spell_value

__all__ = [
    "Catalog", "Condition", "Implication", "Knob", "KnobType", "Relation", "Safety", "Value",
    "as_number", "available_systems", "check_driver", "load_catalog", "render_every", "render_flags", "render_named",
    "spell_value",
]
