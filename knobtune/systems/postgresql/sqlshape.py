"""What a statement's values bind to: the table and column behind each parameter or integer literal, and what an
INSERT returns. A small tokenizer over PostgreSQL's lexical rules (the manual's "Lexical Structure"), not a parser:
it reads the shapes clients and ORMs send (``INSERT INTO t (a, b) VALUES ($1, $2), ... RETURNING t.id``,
SQLAlchemy's ``INSERT ... SELECT ... FROM (VALUES ...)``, ``[t.]col = $n``, ``col IN ($1, $2)``, ``SET col = 7``)
and says nothing of a value it cannot place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<string>(?:[EeBbXxNn]|[Uu]&)?'(?:[^']|'')*')
  | (?P<dollar>\$(?P<tag>[A-Za-z_]\w*)?\$.*?\$(?P=tag)?\$)
  | (?P<param>\$\d+)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<word>[A-Za-z_][\w$]*)
  | (?P<cast>::)
  | (?P<op>[-+*/<>=~!@#%^&|`?]+)
  | (?P<punct>.)
""", re.S | re.X)


@dataclass(frozen=True)
class Token:
    kind: str  # word, quoted, string, dollar, param, number, cast, op, punct
    text: str
    start: int
    end: int

    @property
    def name(self) -> str:
        """An identifier as PostgreSQL folds it: unquoted lower-cased, quoted as written."""
        return self.text[1:-1].replace('""', '"') if self.kind == "quoted" else self.text.lower()

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.lower() in words


@dataclass(frozen=True)
class Value:
    """Where a value sits in the statement: parameter ``param`` (0-based), or an integer literal's span."""

    param: int | None
    start: int
    end: int
    text: str  # the literal's text ("" for a parameter)


@dataclass(frozen=True)
class Binding:
    value: Value
    table: str  # schema.table (schema "public" when the statement does not say)
    column: str


@dataclass(frozen=True)
class Shape:
    """What the statement's values bind to, and for an INSERT its table, its rows and what it returns."""

    bindings: tuple[Binding, ...]
    insert_into: str | None = None
    rows: int | None = None  # the VALUES tuples of an INSERT (None: INSERT ... SELECT of unknown rows)
    returning: tuple[str, ...] = ()  # the columns RETURNING names, in order ("" for an expression)
    sequence_call: tuple[str, str] | None = None  # SELECT nextval('s') / currval('s') / lastval(): (function, s)
    single: bool = True  # one statement (no ';' between two)


def tokens(text: str) -> list[Token]:
    out = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "punct"
        if kind == "tag":
            kind = "dollar"
        if kind != "space":
            out.append(Token(kind, match.group(0), match.start(), match.end()))
    return out


def qualified(name: str) -> str:
    """``schema.table`` for a name as a statement or a dump writes it (quoted parts kept, unquoted folded)."""
    parts = [Token("quoted" if p.startswith('"') else "word", p, 0, 0).name for p in _split_name(name)]
    return ".".join(parts) if len(parts) > 1 else f"public.{parts[0]}"


def _split_name(name: str) -> list[str]:
    return [m.group(0) for m in re.finditer(r'"(?:[^"]|"")*"|[^.]+', name)]


def shape(text: str) -> Shape:
    """The statement's bindings (see the module doc)."""
    toks = tokens(text)
    single = not any(t.text == ";" for t in toks[:-1])
    if not toks:
        return Shape((), single=single)
    first = toks[0]
    if first.is_word("insert"):
        return _insert(toks, single)
    if first.is_word("select"):
        call = _sequence_call(toks)
        if call:
            return Shape((), sequence_call=call, single=single)
    main = _main_table(toks)
    return Shape(tuple(_comparisons(toks, _aliases(toks), main)), single=single)


def _name_at(toks: list[Token], i: int) -> tuple[str, int] | None:
    """A (possibly qualified) name starting at token ``i``, and the index after it."""
    if i >= len(toks) or toks[i].kind not in ("word", "quoted"):
        return None
    parts = [toks[i].name]
    j = i + 1
    while j + 1 < len(toks) and toks[j].text == "." and toks[j + 1].kind in ("word", "quoted"):
        parts.append(toks[j + 1].name)
        j += 2
    return (".".join(parts) if len(parts) > 1 else f"public.{parts[0]}"), j


def _value_at(toks: list[Token], i: int) -> Value | None:
    """A parameter or an integer literal (optionally cast, optionally negative) at ``i``, else None."""
    if i >= len(toks):
        return None
    tok = toks[i]
    if tok.kind == "param":
        return Value(int(tok.text[1:]) - 1, tok.start, tok.end, "")
    if tok.kind == "number" and tok.text.isdigit():
        return Value(None, tok.start, tok.end, tok.text)
    if tok.kind == "string" and re.fullmatch(r"'\d+'", tok.text):
        return Value(None, tok.start + 1, tok.end - 1, tok.text[1:-1])
    return None


def _group(toks: list[Token], i: int) -> tuple[list[list[Token]], int]:
    """The comma-separated elements of the parenthesised group opening at ``i``, and the index after it."""
    depth = 0
    items: list[list[Token]] = []
    current: list[Token] = []
    j = i
    while j < len(toks):
        tok = toks[j]
        if tok.text in ("(", "["):
            depth += 1
            if depth == 1:
                j += 1
                continue
        elif tok.text in (")", "]"):
            depth -= 1
            if depth == 0:
                items.append(current)
                return items, j + 1
        if depth == 1 and tok.text == ",":
            items.append(current)
            current = []
        elif depth >= 1:
            current.append(tok)
        j += 1
    return items, j


def _insert(toks: list[Token], single: bool) -> Shape:
    if len(toks) < 3 or not toks[1].is_word("into"):
        return Shape((), single=single)
    named = _name_at(toks, 2)
    if named is None:
        return Shape((), single=single)
    table, j = named
    if j < len(toks) and toks[j].is_word("as"):
        j += 2
    columns: list[str] = []
    if j < len(toks) and toks[j].text == "(":
        group, j = _group(toks, j)
        columns = [item[-1].name for item in group if item]
    bindings: list[Binding] = []
    rows = 0
    values_at = next((k for k in range(j, len(toks)) if toks[k].is_word("values")), None)
    selects = any(t.is_word("select") for t in toks[j:values_at if values_at is not None else len(toks)])
    if values_at is not None:
        k = values_at + 1
        while k < len(toks) and toks[k].text == "(":
            group, k = _group(toks, k)
            rows += 1
            for position, item in enumerate(group):
                if position < len(columns) and item:
                    value = _value_at(item, 0)
                    if value is not None and _plain_value(item):
                        bindings.append(Binding(value, table, columns[position]))
            if k < len(toks) and toks[k].text == ",":
                k += 1
            else:
                break
    returning: list[str] = []
    depth = 0
    for k, tok in enumerate(toks):
        depth += tok.text == "("
        depth -= tok.text == ")"
        if depth == 0 and tok.is_word("returning"):
            returning = [_returned_column(item) for item in _items(toks[k + 1:])]
            break
    return Shape(tuple(bindings), insert_into=table, rows=rows if values_at is not None and (rows or not selects)
                 else None, returning=tuple(returning), single=single)


def _plain_value(item: list[Token]) -> bool:
    """An element that is one value, perhaps cast: ``$1``, ``$1::INTEGER``, ``42``."""
    return len(item) == 1 or (len(item) >= 3 and item[1].kind == "cast")


def _items(toks: list[Token]) -> list[list[Token]]:
    """A top-level comma-separated list (up to a ';')."""
    items: list[list[Token]] = [[]]
    depth = 0
    for tok in toks:
        if tok.text == ";" and depth == 0:
            break
        depth += tok.text == "("
        depth -= tok.text == ")"
        if tok.text == "," and depth == 0:
            items.append([])
        else:
            items[-1].append(tok)
    return [item for item in items if item]


def _returned_column(item: list[Token]) -> str:
    """The column a RETURNING item names (``id``, ``t.id``, ``t.id AS x``), or "" for an expression."""
    if item and item[0].text == "*":
        return "*"
    names = [t for t in item if t.kind in ("word", "quoted")]
    core = item[: next((k for k, t in enumerate(item) if t.is_word("as")), len(item))]
    if core and all(t.kind in ("word", "quoted") or t.text == "." for t in core) and names:
        return core[-1].name
    return ""


def _sequence_call(toks: list[Token]) -> tuple[str, str] | None:
    """``SELECT nextval('s')``, ``currval('s')`` or ``lastval()`` as the whole select list."""
    if len(toks) >= 4 and toks[1].is_word("nextval", "currval", "lastval") and toks[2].text == "(":
        function = toks[1].text.lower()
        if function == "lastval":
            return function, ""
        if toks[3].kind == "string":
            return function, qualified(toks[3].text[1:-1].replace("''", "'"))
    return None


def _main_table(toks: list[Token]) -> str | None:
    """UPDATE t, DELETE FROM t, or a SELECT's only table."""
    if toks[0].is_word("update"):
        named = _name_at(toks, 1 + (len(toks) > 1 and toks[1].is_word("only")))
        return named[0] if named else None
    if toks[0].is_word("delete") and len(toks) > 2 and toks[1].is_word("from"):
        named = _name_at(toks, 2)
        return named[0] if named else None
    tables = {table for table in _aliases(toks).values()}
    return tables.pop() if len(tables) == 1 else None


_NOT_ALIAS = frozenset({"where", "join", "inner", "left", "right", "full", "cross", "on", "using", "order", "group",
                        "limit", "offset", "for", "set", "natural", "union", "having", "window", "returning",
                        "lateral"})


def _aliases(toks: list[Token]) -> dict[str, str]:
    """Alias (or bare table name) -> schema.table, from FROM/JOIN/UPDATE/INTO clauses."""
    out: dict[str, str] = {}
    for i, tok in enumerate(toks):
        if not tok.is_word("from", "join", "update", "into", "only"):
            continue
        named = _name_at(toks, i + 1)
        if named is None or toks[i + 1].is_word("select", "lateral", "only"):
            continue
        table, j = named
        out[table.split(".")[-1]] = table
        out[table] = table
        if j < len(toks) and toks[j].is_word("as"):
            j += 1
        if j < len(toks) and toks[j].kind in ("word", "quoted") and toks[j].text.lower() not in _NOT_ALIAS:
            out[toks[j].name] = table
    return out


def _comparisons(toks: list[Token], aliases: dict[str, str], main: str | None) -> list[Binding]:
    """``[q.]col = value``, ``value = [q.]col`` and ``[q.]col IN (values)`` anywhere in the statement."""
    out: list[Binding] = []
    for i, tok in enumerate(toks):
        if tok.kind not in ("word", "quoted"):
            continue
        if i > 0 and toks[i - 1].text == ".":
            continue  # the column of a qualified name is read from its qualifier
        qualifier, column, after = None, tok.name, i + 1
        if after + 1 < len(toks) and toks[after].text == "." and toks[after + 1].kind in ("word", "quoted"):
            qualifier, column, after = tok.name, toks[after + 1].name, after + 2
        table = aliases.get(qualifier) if qualifier else main
        if table is None or after >= len(toks):
            continue
        if toks[after].text == "=":
            value = _value_at(toks, after + 1)
            if value is not None and not _continues(toks, _after_cast(toks, after + 2)):
                out.append(Binding(value, table, column))
        elif toks[after].is_word("in") and after + 1 < len(toks) and toks[after + 1].text == "(":
            group, _ = _group(toks, after + 1)
            out.extend(Binding(v, table, column) for item in group
                       if item and _plain_value(item) and (v := _value_at(item, 0)) is not None)
    for i, tok in enumerate(toks):  # value = [q.]col
        value = _value_at(toks, i)
        j = _after_cast(toks, i + 1)
        if value is None or j + 1 >= len(toks) or toks[j].text != "=" or (i and toks[i - 1].text in ("=", ".")):
            continue
        named = _name_at(toks, j + 1)
        if named is None:
            continue
        name, _ = named
        qualifier, column = (name.rsplit(".", 1) if name.count(".") >= 1 and not name.startswith("public.")
                             else (None, name.split(".")[-1]))
        table = aliases.get(qualifier) if qualifier else main
        if table:
            out.append(Binding(value, table, column))
    return out


def _after_cast(toks: list[Token], i: int) -> int:
    """The index after a cast (``::BIGINT``, ``::NUMERIC(12, 2)``) at ``i``, or ``i`` when there is none."""
    if i + 1 < len(toks) and toks[i].kind == "cast" and toks[i + 1].kind in ("word", "quoted"):
        i += 2
        if i < len(toks) and toks[i].text == "(":
            _, i = _group(toks, i)
    return i


def _continues(toks: list[Token], i: int) -> bool:
    """Whether an expression goes on after a value (``$1 + 1``): then the value is not the column's."""
    return i < len(toks) and (toks[i].kind == "op" or toks[i].text == "(")
