"""What every system's known configs share: the machine they are computed for, their record, fixed configs as data.

A system's own heuristics (PGTune, the RocksDB guide) live in its package and
are named by its entry (``System.heuristics``); ``knobtune baseline`` prints
one. Nothing here runs a process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, KnobtuneError, UsageError
from knobtune.outputs import json_mark
from knobtune.knobs.catalog import Knob, KnobType, Value, load_catalog
from knobtune.knobs.display import knob_range, knob_value
from knobtune.units import human_bytes
from knobtune.schema import TEXT, required, setting, table

DISKS = ("ssd", "hdd", "san")
KIB = 1024


@dataclass(frozen=True)
class Machine:
    """What PGTune asks about a machine: memory, CPUs, disk type, expected connections (None: the profile's)."""

    memory_bytes: int
    cpus: int
    disk: str = "ssd"
    connections: int | None = None

    def __post_init__(self) -> None:
        """Check the facts.

        Raises:
            UsageError: a disk type other than ssd, hdd or san, fewer than 1 connection, no memory or no CPU.
        """
        if self.disk not in DISKS:
            raise UsageError(f"disk type {self.disk!r} is not one of {', '.join(DISKS)}. Fix: --disk ssd, hdd or san")
        if self.connections is not None and self.connections < 1:
            raise UsageError(f"--connections {self.connections} is below 1. Fix: give the clients you expect, e.g. 100")
        if self.memory_bytes < KIB or self.cpus < 1:
            raise UsageError(f"a machine with {self.memory_bytes} bytes of memory and {self.cpus} CPUs cannot be "
                             "tuned. Fix: give at least 1 KiB and 1 CPU")

    @classmethod
    def from_host(cls, disk: str | None = None, connections: int | None = None) -> Machine:
        """This machine: physical memory (os.sysconf), CPUs (os.cpu_count), and, unless ``disk`` is given,
        "hdd" when one of its disks says it spins (``rotational_disks``), else "ssd".

        Raises:
            UsageError: ``disk`` or ``connections`` is invalid.
        """
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        detected = "hdd" if rotational_disks() else "ssd"
        return cls(memory_bytes, os.cpu_count() or 1, disk or detected, connections)


def rotational_disks(sys_block: Path = Path("/sys/block")) -> list[str]:
    """Block devices that say they spin (``queue/rotational`` is 1); virtual ones (loop, zram) are skipped.

    A virtual machine's virtio disk says 1 unless its host tells it otherwise, whatever lies beneath.
    """
    found = []
    for device in sorted(sys_block.glob("*")):
        flag = device / "queue" / "rotational"
        try:
            if "/virtual/" not in str(device.resolve()) and flag.read_text().strip() == "1":
                found.append(device.name)
        except OSError:
            continue
    return found


def disk_detection(sys_block: Path = Path("/sys/block")) -> str:
    """How ``Machine.from_host`` reads the disk type here, in one sentence for the user."""
    spinning = rotational_disks(sys_block)
    if not spinning:
        return f"disk type ssd: no disk in {sys_block} says it spins; --disk hdd or san to override"
    return (f"disk type hdd: {', '.join(spinning)} says it spins ({sys_block}/*/queue/rotational = 1; a virtual "
            "machine's virtio disk says so whatever lies beneath); --disk ssd or san to override")


@dataclass(frozen=True)
class HeuristicConfig:
    """A config known before the search (a heuristic users start from, or one published for a benchmark), for one
    machine, fitted to our catalog, with what it could not express: what `knobtune baseline` prints."""

    system: str
    name: str
    profile: str
    machine: Machine
    max_connections: int
    config: Mapping[str, Value]  # our catalog's knob names and units
    notes: tuple[str, ...]
    source: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``compare --config FILE`` reads its "config" (the keys are those users' files hold)."""
        return {"system": self.system, "baseline": self.name, "profile": self.profile,
                "machine": asdict(self.machine), "max_connections": self.max_connections,
                "config": dict(self.config), "notes": list(self.notes), "source": dict(self.source)}

    def to_json(self) -> str:
        """The file ``baseline -o`` writes: ``to_dict`` with knobtune's mark (``knobtune.outputs``)."""
        return json.dumps(json_mark() | self.to_dict(), indent=2) + "\n"

    def describe(self) -> list[str]:
        """Lines a person reads: the source, the machine, every setting beside the default, the notes."""
        catalog = load_catalog(self.system)
        m = self.machine
        if "page" in self.source:  # a guide: one config, whatever the machine
            lines = [f"{self.name} for {self.system}: {self.source['page']} ({self.source.get('section', '')})"]
        elif not self.profile:  # a config published in a repository's file
            lines = [f"{self.name} for {self.system}: {self.source['repository']} {self.source['file']} at "
                     f"{self.source['tag']} (commit {self.source['commit']}): {self.source['what']}"]
        else:
            lines = [f"{self.name} for {self.system}, profile {self.profile}: rules of {self.source['repository']} "
                     f"{self.source['file']} at commit {self.source['commit']}",
                     f"machine: {human_bytes(m.memory_bytes)} memory ({m.memory_bytes} bytes), {m.cpus} CPUs, "
                     f"disk {m.disk}, max_connections {self.max_connections}"]
        width = max(map(len, self.config), default=0)
        for name, value in self.config.items():
            knob = catalog.knobs[name]
            default = "the default" if value == knob.default else f"default {knob_value(knob, knob.default)}"
            lines.append(f"  {name:<{width}}  {knob_value(knob, value)}  ({default})")
        return lines + [f"note: {note}" for note in self.notes]


@dataclass(frozen=True)
class KnownSource:
    """Where a fixed known config comes from: a guide's ``page`` (and its ``section``), or a ``file`` of a
    ``repository`` at a ``tag`` and its ``commit``, and ``what`` of it was taken."""

    page: str | None = setting(None, pattern=r"https?://\S+", what="a web address",
                               example="https://github.com/facebook/rocksdb/wiki/Setup-Options-and-Basic-Tuning")
    section: str | None = setting(None, **TEXT, example="Other general options", note="the page's section")
    repository: str | None = setting(None, pattern=r"[\w.-]+/[\w.-]+", what="a repository (owner/name)",
                                     example="facebook/rocksdb")
    file: str | None = setting(None, **TEXT, example="tools/benchmark.sh", note="the repository's file")
    tag: str | None = setting(None, **TEXT, example="v7.8.3")
    commit: str | None = setting(None, pattern=r"[0-9a-f]{40}", what="a commit (40 hex digits)",
                                 example="bf2c335184de16a3cc1787fa97ef9f22f7114238")
    what: str | None = setting(None, **TEXT, example="its write benchmarks' settings", note="what of the file it is")


PUBLISHED_SOURCE = ("repository", "file", "tag", "commit", "what")  # what a config published in a repository gives


@dataclass(frozen=True, kw_only=True)
class KnownConfigFile:
    """A fixed known config (``systems/SYSTEM/NAME.toml``: a tuning guide's, or one published for a benchmark)."""

    source: KnownSource = required()
    config: Mapping[str, Any] = table(note="knob -> value, in the catalog's names and units (\"1MiB\")")
    left_out: Mapping[str, str] = table(**TEXT, example="not in the catalog",
                                        note="a setting of the source the catalog lacks -> why it is left out")


def fixed_config(system: str, path: Path, machine: Machine) -> HeuristicConfig:
    """A fixed config (a data file of the system's, ``KnownConfigFile``) in ``system``'s catalog names and units; a
    value outside the catalog's range is clamped into it, with a note, and the file's ``left_out`` settings (knobs
    the catalog lacks) are named in notes too.

    Raises:
        CatalogError: a field of the file is unknown, missing or of the wrong kind (one line each), it gives no
            config or neither a page nor a published file as its source, or it names a knob the catalog lacks or a
            value it refuses.
    """
    name = path.stem
    known = schema.read(KnownConfigFile, read_toml(path, CatalogError, "known config"),
                        schema.Where(str(path), docs="docs/files.md"), CatalogError)
    source = schema.to_dict(known.source)
    if "page" not in source and (lacking := [key for key in PUBLISHED_SOURCE if key not in source]):
        raise CatalogError(f"{path}: [source] gives no page and no {', '.join(lacking)}. Fix: give page = \"https://"
                           f"...\" (a guide), or {', '.join(PUBLISHED_SOURCE)} (a file published in a repository)")
    if not known.config:
        raise CatalogError(f"{path}: no [config] (or an empty one). Fix: give the knobs it sets, e.g. "
                           "[config] max_background_jobs = 6")
    catalog = load_catalog(system)
    notes = [f"{setting} is left out: {why}" for setting, why in known.left_out.items()]
    try:
        fitted = {knob: clamp_into_range(catalog[knob], catalog[knob].typed(raw), notes, name)
                  for knob, raw in known.config.items()}
        config = catalog.config(fitted)
    except (KnobtuneError, KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"{path}: {exc}. Fix: use the {system} catalog's knob names and value types") from None
    changed = {k: v for k, v in config.items() if k in known.config}
    return HeuristicConfig(system, name, "", machine, 0, changed, tuple(notes), source)


def clamp_into_range(knob: Knob, value: Value, notes: list[str], who: str) -> Value:
    """``value`` clamped into the knob's range, with a note naming ``who`` gave it when it was outside."""
    if not knob.is_numeric or value in knob.special or knob.min is None or knob.max is None:
        return value
    clamped = min(max(value, knob.min), knob.max)
    clamped = float(clamped) if knob.type is KnobType.FLOAT else int(clamped)
    if clamped != value:
        notes.append(f"{knob.name}: {who} gives {knob_value(knob, value)}, outside the catalog's range "
                     f"{knob_range(knob)}: clamped to {knob_value(knob, clamped)}")
    return clamped
