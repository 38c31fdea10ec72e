"""Values the server generated and the application used again: the ids of ``INSERT ... RETURNING`` (every ORM's
insert), ``nextval``, ``currval`` and ``lastval``, found in a capture so the replay can use its own server's ids.

A log holds what clients sent, not what the server answered. The capture knows, from the dump, each table whose
key a sequence fills (``serial``, ``identity``, a ``nextval`` default), the sequence's last value when the dump
was taken, and every foreign key that references such a key. A statement of a session that inserts into such a
table is a **generator**; the first new values of that key (above the dump's last value) that the same session
then sends in a column holding that key (the key itself or a foreign key to it) are what the generator returned:
each such value is **claimed** as one of its rows (k rows claim k values, in ascending order, as a sequence hands
them out in row order; a value first used after a later generator is its earlier generator's when the sequence's
order says so). Every later use of a claimed value, in any session, is a **reference** to the generator's
row. The replayer (``native/pgreplay``) reads each generator's returned rows and sends, in place of each
reference, the value its own server returned; a reference from another session waits until the generating
session's transaction has ended (the application could not have read the row before it was committed).

A new value that no generator of its session claims (a value the application read from another session's rows,
which the log does not show) is **unmapped**: it is replayed as captured, and the capture says how many statements
hold one, by fingerprint. An INSERT into a keyed table that has no RETURNING is sent with ``RETURNING key``
appended, so the replay knows every id it made: the data check then compares keys through the map
(replayed id -> captured id, or the generating statement's row when nothing claimed it).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from knobtune.errors import WorkloadError
from knobtune.server.process import last_lines
from knobtune.systems.postgresql import sqlshape
from knobtune.systems.postgresql.pglog import fingerprint
from knobtune.systems.postgresql.server import PG_BIN

KEYS_FILE = "keys.json"
CLAIM_DEPTH = 16  # how many of a session's latest generators of one table a new value may have come from
_DEFAULT = re.compile(r"ALTER TABLE (?:ONLY )?(\S+) ALTER COLUMN (\S+) SET DEFAULT "
                      r"nextval\('((?:[^']|'')+)'::regclass\)")
_IDENTITY = re.compile(r"ALTER TABLE (?:ONLY )?(\S+) ALTER COLUMN (\S+) ADD GENERATED (?:ALWAYS|BY DEFAULT) AS "
                       r"IDENTITY \(\s*SEQUENCE NAME (\S+)", re.S)
_FOREIGN = re.compile(r"ALTER TABLE (?:ONLY )?(\S+)\s+ADD CONSTRAINT \S+ FOREIGN KEY \(([^),]+)\) REFERENCES "
                      r"(\S+?)\(([^),]+)\)", re.S)
_SETVAL = re.compile(r"SELECT pg_catalog\.setval\('((?:[^']|'')+)', (-?\d+), (true|false)\);")


@dataclass(frozen=True)
class Keys:
    """From the dump: table -> (its sequence-filled key column, the sequence, the last value drawn at the dump),
    and (table, column) -> the keyed table a foreign key references."""

    keys: Mapping[str, tuple[str, str, int]]
    references: Mapping[tuple[str, str], str]

    def holds_key_of(self, table: str, column: str) -> str | None:
        """The keyed table whose key ``table.column`` holds (the key itself, or a foreign key to it), or None."""
        key = self.keys.get(table)
        if key and key[0] == column:
            return table
        return self.references.get((table, column))

    def record(self) -> dict[str, object]:
        return {"keys": {t: {"column": c, "sequence": s, "last_value": v} for t, (c, s, v) in self.keys.items()},
                "references": {f"{t}.{c}": k for (t, c), k in self.references.items()}}


def read_keys(dump: Path, dump_format: str) -> Keys:
    """The keys of the dump at ``dump`` (its schema and its sequences' values; no row is read).

    Raises:
        WorkloadError: pg_restore cannot read the dump's schema.
    """
    ddl = _custom_ddl(dump) if dump_format == "custom" else "".join(_plain_ddl(dump))
    ddl = re.sub(r"\s+", " ", ddl)
    last = {sqlshape.qualified(m.group(1).replace("''", "'")): int(m.group(2)) - (m.group(3) == "false")
            for m in _SETVAL.finditer(ddl)}
    keys: dict[str, tuple[str, str, int]] = {}
    for match in _DEFAULT.finditer(ddl):
        sequence = sqlshape.qualified(match.group(3).replace("''", "'"))
        keys[sqlshape.qualified(match.group(1))] = (_column(match.group(2)), sequence, last.get(sequence, 0))
    for match in _IDENTITY.finditer(ddl):
        sequence = sqlshape.qualified(match.group(3))
        keys[sqlshape.qualified(match.group(1))] = (_column(match.group(2)), sequence, last.get(sequence, 0))
    references: dict[tuple[str, str], str] = {}
    for match in _FOREIGN.finditer(ddl):
        target = sqlshape.qualified(match.group(3))
        if target in keys and keys[target][0] == _column(match.group(4)):
            references[(sqlshape.qualified(match.group(1)), _column(match.group(2)))] = target
    return Keys(keys, references)


def _column(text: str) -> str:
    text = text.strip()
    return text[1:-1].replace('""', '"') if text.startswith('"') else text.lower()


def _custom_ddl(dump: Path) -> str:
    """The schema of a custom dump, and its sequences' SEQUENCE SET entries, as SQL."""
    listing = _restore(["-l", str(dump)], dump)
    entries = [line for line in listing.splitlines() if " SEQUENCE SET " in line]
    schema = _restore(["--schema-only", "-f", "-", str(dump)], dump)
    if not entries:
        return schema
    with tempfile.NamedTemporaryFile("w", suffix=".list") as chosen:
        chosen.write("\n".join(entries) + "\n")
        chosen.flush()
        return schema + _restore(["-L", chosen.name, "-f", "-", str(dump)], dump)


def _restore(args: list[str], dump: Path) -> str:
    done = subprocess.run([str(PG_BIN / "pg_restore"), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise WorkloadError(f"{dump}: pg_restore cannot read its schema ({last_lines(done.stderr)}). Fix: take the "
                            "dump again with `pg_dump -Fc`")
    return done.stdout


def _plain_ddl(dump: Path) -> Iterable[str]:
    """A plain dump's lines without its COPY data."""
    with dump.open(encoding="utf-8", errors="replace") as handle:
        copying = False
        for line in handle:
            if copying:
                copying = line != "\\.\n"
            elif line.startswith("COPY ") and line.rstrip().endswith("FROM stdin;"):
                copying = True
            else:
                yield line


# ---------------------------------------------------------------- generators, claims and references


@dataclass
class Generator:
    """A statement that makes keys: which table's, which result column holds them, the values it is known to
    have returned (by claims), and its slots (one per claimed row, numbered over the whole capture)."""

    statement: int
    session: int
    table: str
    column: int  # the result column that holds the key (-1: RETURNING is appended, the only column)
    rows: int | None
    claimed: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    append: str = ""  # " RETURNING key" when the statement does not return it


@dataclass(frozen=True)
class Reference:
    statement: int
    value: sqlshape.Value
    slot: int


@dataclass(frozen=True)
class IdMap:
    """What the replay remaps: generators by statement, references by statement, and what could not be mapped."""

    generators: Mapping[int, Generator]
    references: Mapping[int, tuple[Reference, ...]]
    captured: Mapping[int, int]  # slot -> the value the application saw
    unmapped: Counter[str]  # fingerprint -> statements holding a new key value that no generator claimed
    unmapped_statements: int

    def note(self) -> str | None:
        """The capture's note on what it remaps and what it cannot, or None when nothing generated a key."""
        if not self.generators:
            return None
        slots = len(self.captured)
        text = (f"{len(self.generators):,} statements generate keys; {slots:,} of their values are used again by "
                f"{sum(len(r) for r in self.references.values()):,} values of later statements, which the replay "
                "sends as its own server returned them")
        if self.unmapped_statements:
            top = "; ".join(f"{count:,}x {print_[:80]}" for print_, count in self.unmapped.most_common(3))
            text += (f"; {self.unmapped_statements:,} statements use a new key no statement of their session "
                     f"generated (replayed as captured: {top})")
        return text


def map_ids(statements: Sequence[tuple[int, str, tuple[str | None, ...], str]], keys: Keys) -> IdMap:
    """The generators and references of ``statements`` (session, text, params, kind s|p|u), in captured start
    order (see the module doc)."""
    generators: dict[int, Generator] = {}
    references: dict[int, list[Reference]] = {}
    by_session: dict[tuple[int, str], list[Generator]] = {}  # (session, table) -> its generators, in order
    slot_of: dict[tuple[str, int], int] = {}  # (keyed table, captured value) -> slot
    captured: dict[int, int] = {}
    unmapped: Counter[str] = Counter()
    unmapped_statements = 0
    sequences = {sequence: table for table, (_, sequence, _) in keys.keys.items()}
    for index, (session, text, params, kind) in enumerate(statements):
        shape = sqlshape.shape(text)
        uses: list[tuple[sqlshape.Value, str, int]] = []
        for binding in shape.bindings:
            if (kind == "s") != (binding.value.param is None):
                continue  # a simple query's literals; an extended one's parameters (a prepared text is fixed)
            keyed = keys.holds_key_of(binding.table, binding.column)
            number = _integer(binding.value, params)
            if keyed and number is not None and number > keys.keys[keyed][2]:
                uses.append((binding.value, keyed, number))
        missed = False
        for value, keyed, number in uses:
            slot = slot_of.get((keyed, number))
            if slot is None:
                generator = _claimant(by_session.get((session, keyed), []), number, index)
                if generator is not None:
                    generator.claimed.append(number)
                    slot = slot_of[(keyed, number)] = len(captured)
                    captured[slot] = number
                    generator.slots.append(slot)
            if slot is None:
                missed = True
                continue
            references.setdefault(index, []).append(Reference(index, value, slot))
        if missed:
            unmapped[fingerprint(text)[:120]] += 1
            unmapped_statements += 1
        generator = _generator(index, session, shape, keys, sequences)
        if generator is not None:
            generators[index] = generator
            by_session.setdefault((session, generator.table), []).append(generator)
    for generator in generators.values():  # a sequence hands out its values in row order
        if len(generator.claimed) > 1:
            order = sorted(range(len(generator.claimed)), key=lambda k: generator.claimed[k])
            generator.slots = [generator.slots[k] for k in order]
            generator.claimed = [generator.claimed[k] for k in order]
    return IdMap(generators, {k: tuple(v) for k, v in references.items()}, captured, unmapped, unmapped_statements)


def _claimant(generators: list[Generator], number: int, index: int) -> Generator | None:
    """Which of a session's generators of one table returned ``number``: the latest with a row left whose place
    in the sequence fits (every value an earlier generator returned is below it, every later one's above), among
    the last CLAIM_DEPTH; None when none fits."""
    candidates = [g for g in generators[-CLAIM_DEPTH:] if g.statement != index]
    for position in range(len(candidates) - 1, -1, -1):
        generator = candidates[position]
        if generator.rows is not None and len(generator.claimed) >= generator.rows:
            continue
        earlier = (v for g in candidates[:position] for v in g.claimed)
        later = (v for g in candidates[position + 1:] for v in g.claimed)
        if all(v < number for v in earlier) and all(v > number for v in later):
            return generator
    return None


def _integer(value: sqlshape.Value, params: tuple[str | None, ...]) -> int | None:
    text = value.text if value.param is None else (params[value.param] if value.param < len(params) else None)
    if text is None or not text.isdigit() or len(text) > 19:
        return None
    return int(text)


def _generator(index: int, session: int, shape: sqlshape.Shape, keys: Keys,
               sequences: Mapping[str, str]) -> Generator | None:
    if shape.insert_into is not None and shape.insert_into in keys.keys:
        key = keys.keys[shape.insert_into][0]
        if key in shape.returning:
            return Generator(index, session, shape.insert_into, shape.returning.index(key), shape.rows)
        if not shape.returning and shape.single:
            return Generator(index, session, shape.insert_into, -1, shape.rows, append=f' RETURNING "{key}"')
        return None
    if shape.sequence_call is not None:
        function, sequence = shape.sequence_call
        table = sequences.get(sequence)
        if table is not None and function in ("nextval", "currval"):
            return Generator(index, session, table, 0, 1)
    return None


# ---------------------------------------------------------------- what the replay's data check reads


def write_keys(keys: Keys, path: Path) -> None:
    path.write_text(json.dumps(keys.record(), indent=1, sort_keys=True) + "\n")
    path.chmod(0o600)


def load_keys(path: Path) -> Keys:
    """The keys a capture recorded (an older capture has none: nothing is remapped)."""
    if not path.is_file():
        return Keys({}, {})
    data = json.loads(path.read_text())
    keys = {t: (str(k["column"]), str(k["sequence"]), int(k["last_value"])) for t, k in data["keys"].items()}
    references = {}
    for name, target in data["references"].items():
        table, column = name.rsplit(".", 1)
        references[(table, column)] = str(target)
    return Keys(keys, references)
