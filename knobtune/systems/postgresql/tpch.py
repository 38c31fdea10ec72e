"""Our TPC-H kit's queries (TPC-H Standard Specification 3.0.1): their parameters, one psql session, the answers.

The 22 queries live in ``knobtune/workloads/tpch/qNN.sql`` with psql
variables for their substitution parameters (``:delta``, ``:'date'``). The
parameters are drawn from a seed with ``random.Random`` in the ranges of the
specification's clause 2.4.N.3, once per seed: every config and every run of
a study (one seed) asks the same questions of the same data, so their answers
compare. A run is one psql session (``-X``, no shell) that times each query
(``\\timing``) and prints its rows unaligned; ``answers`` reads both back.
"""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

QUERY_DIR = Path(__file__).resolve().parents[2] / "workloads" / "tpch"
QUERIES = tuple(range(1, 23))
SEPARATOR = "\x1f"  # between fields of a row: no generated text holds it
MARK = "@@ query "
# Numbers in answers agree within this relative difference. Our columns are decimals, whose sums and averages are
# exact under any plan; a float column's sum may change in its last digits with the order a parallel plan adds in.
# Not 1e-6: Q1's sums reach 1e10 at scale factor 0.5, where one changed line moves them by less than 1e-7.
REL_TOL = Decimal("1e-12")
_TIME = re.compile(r"^Time: ([\d.]+) ms")

NATIONS = ("ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE", "GERMANY", "INDIA",
           "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA", "MOROCCO", "MOZAMBIQUE", "PERU", "CHINA",
           "ROMANIA", "SAUDI ARABIA", "VIETNAM", "RUSSIA", "UNITED KINGDOM", "UNITED STATES")
NATION_REGION = (0, 1, 1, 1, 4, 0, 3, 3, 2, 2, 4, 4, 2, 4, 0, 0, 0, 1, 2, 3, 4, 2, 3, 3, 1)
REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
TYPE_1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
CONTAINER_1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
COLORS = ("almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood burnished "
          "chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim dodger drab firebrick "
          "floral forest frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace lavender "
          "lawn lemon light lime linen magenta maroon medium metallic midnight mint misty moccasin navajo navy olive "
          "orange orchid pale papaya peach peru pink plum powder puff purple red rose rosy royal saddle salmon sandy "
          "seashell sienna sky slate smoke snow spring steel tan thistle tomato turquoise violet wheat white "
          "yellow").split()

Rows = tuple[tuple[str, ...], ...]


def parameters(seed: int, scale: float) -> dict[int, dict[str, str]]:
    """Each query's substitution parameters (psql variable -> value), drawn from ``seed`` (clause 2.4.N.3)."""
    pick = random.Random(seed)

    def month(first: tuple[int, int], last: tuple[int, int]) -> str:
        months = (last[0] - first[0]) * 12 + last[1] - first[1]
        year, m = divmod(first[0] * 12 + first[1] - 1 + pick.randint(0, months), 12)
        return datetime.date(year, m + 1, 1).isoformat()

    def year() -> str:
        return f"{pick.randint(1993, 1997)}-01-01"

    def brand() -> str:
        return f"Brand#{pick.randint(1, 5)}{pick.randint(1, 5)}"

    nation = pick.randrange(len(NATIONS))
    nation1, nation2 = pick.sample(NATIONS, 2)
    mode1, mode2 = pick.sample(SHIP_MODES, 2)
    return {
        1: {"delta": str(pick.randint(60, 120))},
        2: {"size": str(pick.randint(1, 50)), "type": pick.choice(TYPE_3), "region": pick.choice(REGIONS)},
        3: {"segment": pick.choice(SEGMENTS), "date": f"1995-03-{pick.randint(1, 31):02d}"},
        4: {"date": month((1993, 1), (1997, 10))},
        5: {"region": pick.choice(REGIONS), "date": year()},
        6: {"date": year(), "discount": f"0.0{pick.randint(2, 9)}", "quantity": str(pick.randint(24, 25))},
        7: {"nation1": nation1, "nation2": nation2},
        8: {"nation": NATIONS[nation], "region": REGIONS[NATION_REGION[nation]],
            "type": " ".join(pick.choice(s) for s in (TYPE_1, TYPE_2, TYPE_3))},
        9: {"color": pick.choice(COLORS)},
        10: {"date": month((1993, 2), (1995, 1))},
        11: {"nation": pick.choice(NATIONS), "fraction": f"{0.0001 / scale:.10f}"},
        12: {"shipmode1": mode1, "shipmode2": mode2, "date": year()},
        13: {"word1": pick.choice(("special", "pending", "unusual", "express")),
             "word2": pick.choice(("packages", "requests", "accounts", "deposits"))},
        14: {"date": month((1993, 1), (1997, 12))},
        15: {"date": month((1993, 1), (1997, 10))},
        16: {"brand": brand(), "type": f"{pick.choice(TYPE_1)} {pick.choice(TYPE_2)}",
             **{f"size{i + 1}": str(s) for i, s in enumerate(pick.sample(range(1, 51), 8))}},
        17: {"brand": brand(), "container": f"{pick.choice(CONTAINER_1)} {pick.choice(CONTAINER_2)}"},
        18: {"quantity": str(pick.randint(312, 315))},
        19: {"quantity1": str(pick.randint(1, 10)), "quantity2": str(pick.randint(10, 20)),
             "quantity3": str(pick.randint(20, 30)), "brand1": brand(), "brand2": brand(), "brand3": brand()},
        20: {"color": pick.choice(COLORS), "date": year(), "nation": pick.choice(NATIONS)},
        21: {"nation": pick.choice(NATIONS)},
        22: {f"code{i + 1}": str(c) for i, c in enumerate(pick.sample(range(10, 35), 7))},
    }


def order(seed: int) -> tuple[int, ...]:
    """The 22 queries in the order a run takes them: shuffled by ``seed`` (a small rung runs the first few)."""
    queries = list(QUERIES)
    random.Random(seed * 7919 + 22).shuffle(queries)
    return tuple(queries)


def script(queries: Sequence[int], params: Mapping[int, Mapping[str, str]], path: Path) -> Path:
    """A psql script that runs ``queries`` in turn, each after a line naming it, timed. Written to ``path``.

    Before each query its variables are set from the ``-v`` arguments ``variables`` gives (``\\set date
    :q04_date``): the values reach psql as arguments, and each query reads its own under the names its file uses.
    """
    lines = ["\\timing on"]
    for query in queries:
        lines += [f"\\set {name} :q{query:02d}_{name}" for name in params[query]]
        lines += [f"\\echo '{MARK}{query}'", f"\\i '{QUERY_DIR / f'q{query:02d}.sql'}'"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def variables(params: Mapping[int, Mapping[str, str]], queries: Sequence[int]) -> list[str]:
    """psql ``-v`` arguments for the parameters of ``queries``, one ``qNN_NAME=VALUE`` each."""
    return [arg for query in sorted(set(queries)) for name, value in params[query].items()
            for arg in ("-v", f"q{query:02d}_{name}={value}")]


@dataclass(frozen=True)
class Answer:
    """One query's run: which query, its time (psql's ``\\timing``) and its rows."""

    query: int
    seconds: float
    rows: Rows


def answers(output: str) -> tuple[Answer, ...]:
    """The queries' answers and times as one psql session printed them (``script``, unaligned, tuples only)."""
    found: list[Answer] = []
    query: int | None = None
    rows: list[tuple[str, ...]] = []
    for line in output.splitlines():
        if line.startswith(MARK):
            query, rows = int(line.removeprefix(MARK)), []
            continue
        timed = _TIME.match(line)
        if timed and query is not None:
            found.append(Answer(query, float(timed.group(1)) / 1000, tuple(rows)))
            query = None
        elif query is not None:
            rows.append(tuple(line.split(SEPARATOR)))
    return tuple(found)


def difference(got: Rows, expected: Rows) -> str | None:
    """How ``got`` differs from ``expected`` (numbers within ``REL_TOL``), or None when they agree."""
    if len(got) != len(expected):
        return f"{len(got)} rows, the default's {len(expected)}"
    for index, (row, wanted) in enumerate(zip(got, expected, strict=True)):
        if len(row) != len(wanted):
            return f"row {index + 1} has {len(row)} columns, the default's {len(wanted)}"
        for column, (value, other) in enumerate(zip(row, wanted, strict=True)):
            if value != other and not _close(value, other):
                return f"row {index + 1}, column {column + 1}: {value!r}, the default's {other!r}"
    return None


def _close(a: str, b: str) -> bool:
    """Whether two printed numbers agree within ``REL_TOL`` (read as decimals: no float rounding of their own)."""
    try:
        x, y = Decimal(a), Decimal(b)
    except InvalidOperation:
        return False
    return x.is_finite() and y.is_finite() and abs(x - y) <= REL_TOL * max(abs(x), abs(y))
