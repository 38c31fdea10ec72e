"""A benchmark run as an argv from a workload's driver section: its load, its run, its result, its data check.

The section (docs/system-file.md, "The workload's driver section") says
``run`` (argv, required) and ``load`` (argv, once); ``operations`` (a pattern
whose group is the count of operations the run did, required), ``p99_ms`` /
``p95_ms`` (patterns, optional); ``clients``; ``check`` = { sql, expect } (a
query whose answer's columns must equal the expressions in ``expect``, over
the section's numbers); ``data_bytes`` (the loaded data's size: a size or an
expression over them); ``point_reads_only``, ``scans``, ``reads``, ``writes`` (the
workload's shape); any other number or text is a placeholder its argv may
name (or an expression use): one nothing names is refused as a misspelt
field. The known fields are read through the schema (``CommandSection``).
A system described by a file runs it (``described/target.py``), and so may a
system's package (PostgreSQL runs the same sysbench workloads through it).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from dataclasses import dataclass
from typing import Any, ClassVar

from simpleeval import SimpleEval

from knobtune import schema
from knobtune.errors import KnobtuneError, WorkloadError
from knobtune.names import nearest
from knobtune.schema import required, setting
from knobtune.units import parse_bytes
from knobtune.targets import FailureKind, Phase, RunFailure, WorkloadFacts
from knobtune.server.process import last_lines, run_logged
from knobtune.server.life import Benchmarked
from knobtune.described.system_file import fill, placeholders
from knobtune.workloads import Rung, Workload

RUN_PLACES = ("connection", "operations", "records", "seed", "clients")  # what a workload's argv may name

Places = dict[str, "str | list[str]"]


class CommandDriver:
    """How one workload runs through one driver whose benchmark is an argv (``sysbench``)."""

    def __init__(self, workload: Workload, driver: str, places: Iterable[str]) -> None:
        """Check the workload's section for ``driver``; ``places`` are the system's own placeholders.

        Raises:
            WorkloadError: one line naming the workload, the field and the fix.
        """
        self.workload, self.driver = workload, driver
        self.section = read_section(workload, driver, places)

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return isinstance(section.get("check"), dict)

    @property
    def clients(self) -> int:
        return int(self.section.get("clients", 1))

    def data_bytes(self) -> int | None:
        """The loaded data's size, as the section's ``data_bytes`` says (None: it says nothing)."""
        expression = self.section.get("data_bytes")
        return None if expression is None else int(_evaluate(expression, self.section))

    def workload_facts(self) -> WorkloadFacts:
        """The workload as its section says it: clients, ``point_reads_only``, ``scans``, ``reads``, ``writes`` and
        the loaded data's size (none given or 0: records x (key + value))."""
        section = self.section
        return WorkloadFacts.of(self.workload, data_bytes=self.data_bytes() or None, clients=self.clients,
                                reads=bool(section.get("reads", True)), writes=bool(section.get("writes", True)),
                                scans=bool(section.get("scans", False)),
                                point_reads_only=bool(section.get("point_reads_only", False)))

    def loaded_inputs(self) -> dict[str, Any]:
        """What the loaded data depends on, from the section (its load and sizes, not how it runs)."""
        return {"load": list(self.section.get("load", [])),
                "section": {k: v for k, v in self.section.items() if k not in ("run", "check", "description")}}

    def places(self, system: Places, connection: list[str], operations: int, seed: int) -> Places:
        """``system``'s places plus the run's: the connection, the rung's operations, the seed, the section's values."""
        places: Places = dict(system)
        places.update({"connection": connection, "operations": str(operations), "records": str(self.workload.records),
                       "seed": str(seed), "clients": str(self.clients)})
        places.update({k: str(v) for k, v in self.section.items() if k not in SECTION_KEYS and not isinstance(v, dict)})
        return places

    def run_argv(self, places: Places) -> list[str]:
        return fill(self.section["run"], places)

    def load(self, places: Places, log: Path) -> None:
        """The section's load, once (nothing when it has none).

        Raises:
            KnobtuneError: the load failed (the set-up or the machine is at fault: the default config ran it).
        """
        if "load" not in self.section:
            return
        argv = fill(self.section["load"], places)
        result = run_logged(argv, log_path=log, timeout_s=3600)
        if result.returncode != 0:
            raise KnobtuneError(f"loading {self.workload.name}'s data failed ({Path(argv[0]).name} status "
                                f"{result.returncode}): {last_lines(log.read_text(errors='replace'))}. Fix: see {log}")

    def run(self, rung: Rung, timeout_s: float | None, log_path: Path, places: Places) -> Benchmarked:
        """Run the benchmark for the rung's operations (``places`` from ``places``).

        Raises:
            RunFailure: TIMEOUT at ``timeout_s``; CRASH when it failed; TOOL when its output has no count.
        """
        argv = self.run_argv(places)
        program = Path(argv[0]).name
        result = run_logged(argv, log_path=log_path, timeout_s=timeout_s)
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT,
                             f"{program} was stopped after {timeout_s:.1f} s (the limit at {rung})",
                             log_path)
        text = log_path.read_text(errors="replace")
        if result.returncode != 0:
            raise RunFailure(FailureKind.CRASH, f"{program} failed (status {result.returncode}): {last_lines(text)}",
                             log_path)
        done = re.search(self.section["operations"], text)
        if done is None:
            raise RunFailure(FailureKind.TOOL, f"{program}'s output has no match for the workload's operations pattern "
                             f"{self.section['operations']!r}", log_path)
        count, elapsed = int(float(done.group(1))), result.elapsed_s
        phase = Phase(self.workload.name, count, elapsed, count / elapsed if elapsed else 0.0,
                      p99_us=_latency_us(self.section.get("p99_ms"), text))
        return Benchmarked(phases=(phase,), measured=(self.workload.name,), elapsed_s=elapsed,
                           verified=self.checks_reads(self.section))

    def check(self, answer: Callable[[str, Path], str], log_path: Path) -> None:
        """The section's data check: every column of ``answer(sql, log)`` equals its expected expression.

        Raises:
            RunFailure: (DATA_LOSS) a column differs.
        """
        check = self.section.get("check")
        if not isinstance(check, dict):
            return
        got = [a.strip() for a in answer(check["sql"], log_path.with_suffix(".check.log")).split("\t")]
        expected = [str(int(_evaluate(e, self.section))) for e in check["expect"]]
        if got != expected:
            raise RunFailure(FailureKind.DATA_LOSS, f"data loss: the workload's check ({check['sql']}) answered "
                             f"{' '.join(got)}, expected {' '.join(expected)}", log_path)


@dataclass(frozen=True, kw_only=True)
class Check:
    """The data check: a query whose answer's columns must equal the expressions, one per column."""

    sql: str = required(pattern=r"[\s\S]*\S[\s\S]*", what="a query", example="SELECT COUNT(*) FROM t")
    expect: Any = required(example=["rows"])  # expressions over the section's numbers (or numbers): checked below


@dataclass(frozen=True, kw_only=True)
class CommandSection:
    """A workload's section for a driver whose benchmark is an argv (docs/system-file.md); any other number or text
    of the section is a placeholder its argv or expressions name."""

    run: tuple[str, ...] = required(items="argv", example=["/usr/bin/prog", "{connection}", "--events={operations}"])
    load: tuple[str, ...] | None = setting(None, items="argv", example=["/usr/bin/prog", "{connection}", "prepare"])
    operations: str = required(example="transactions:\\s+(\\d+)")
    p99_ms: str | None = setting(None, example="99th percentile:\\s+([0-9.]+)")
    p95_ms: str | None = setting(None, example="95th percentile:\\s+([0-9.]+)")
    clients: int = setting(1, least=1, example=8)
    check: Check | None = None
    data_bytes: Any = None  # a size or an expression over the section's numbers: checked below
    point_reads_only: bool = setting(False, example=True)
    scans: bool = setting(False, example=True)
    reads: bool = setting(True, example=True)
    writes: bool = setting(True, example=False)
    description: str | None = setting(None, example="a sysbench workload")

    json_extra: ClassVar[dict[str, Any]] = {  # what the section's own fields may be (``schema_views.json_schema``)
        "type": ["string", "number"], "description": "a placeholder that run or load names, or an expression uses"}


SECTION_KEYS = tuple(f.name for f in dataclasses.fields(CommandSection))


def read_section(workload: Workload, driver: str, system_places: Iterable[str]) -> Mapping[str, Any]:
    """``workload``'s section for ``driver``, checked whole: its fields through the schema (``CommandSection``),
    each other field a number or text that an argv or an expression names (a misspelt field, ``cleints``, names
    nothing: refused with the nearest name), the placeholders, patterns and expressions.

    Raises:
        WorkloadError: one line per problem naming the workload, the field and the fix.
    """
    section = workload.driver(driver)
    source = f"{workload.source or f'workload {workload.name!r}'}: [drivers.{driver}]"
    problems = _extras(section, source)
    try:
        schema.read(CommandSection, {k: v for k, v in section.items() if k in SECTION_KEYS}, schema.Where(source,
                    docs="docs/system-file.md"), WorkloadError)
    except WorkloadError as exc:
        problems += str(exc).splitlines()
    if problems:
        raise WorkloadError("\n".join(problems))
    return _checked(section, f"workload '{workload.name}': [drivers.{driver}]", set(system_places))


def _extras(section: Mapping[str, Any], source: str) -> list[str]:
    """What is wrong with the section's own fields (placeholders): each a number or text that something names."""
    named = placeholders([*_texts(section.get("run")), *_texts(section.get("load"))])
    check = section.get("check")
    expressions = [section.get("data_bytes"), *(check.get("expect", []) if isinstance(check, Mapping) else [])]
    named |= {n for e in expressions if isinstance(e, str) for n in _names(e)}
    problems = []
    for key, value in section.items():
        if key in SECTION_KEYS:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            problems.append(f"{source}: unknown field '{key}'{nearest(key, SECTION_KEYS)}. Fix: remove it, or use "
                            f"one of {', '.join(SECTION_KEYS)} (a field of its own is a number or text)")
        elif key not in named:
            problems.append(f"{source}: unknown field '{key}'{nearest(key, SECTION_KEYS)}: no argv or expression "
                            f"names it. Fix: remove it, name it ({{{key}}} in run), or use one of "
                            f"{', '.join(SECTION_KEYS)}")
    return problems


def _texts(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _names(expression: str) -> set[str]:
    """The names an expression uses (none when it is no expression: its check says so)."""
    try:
        return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


def _checked(section: Mapping[str, Any], where: str, system_places: set[str]) -> Mapping[str, Any]:
    """What the section's typed fields must agree on: placeholders, patterns, expressions."""
    places = system_places | set(RUN_PLACES) | {
        k for k, v in section.items() if k not in SECTION_KEYS and isinstance(v, str | int | float)}
    for key in ("run", "load"):
        value = section.get(key)
        if value is None:
            continue
        unknown = placeholders(value) - places
        if unknown:
            raise WorkloadError(f"{where} {key} names unknown placeholder {{{sorted(unknown)[0]}}}. Fix: use one of "
                                + ", ".join("{" + p + "}" for p in sorted(places)))
    for key in ("operations", "p99_ms", "p95_ms"):
        pattern = section.get(key)
        if pattern is None:
            continue
        try:
            ok = re.compile(pattern).groups >= 1
        except re.error:
            ok = False
        if not ok:
            raise WorkloadError(f"{where} {key} must be a pattern with one group around the number. Fix: e.g. "
                                f"{key} = \"transactions:\\\\s+(\\\\d+)\"")
    check = section.get("check")
    if check is not None:
        expect = check["expect"]
        if not isinstance(expect, list) or not expect:
            raise WorkloadError(f"{where} check must be a table with sql (a query) and expect (a list of "
                                "expressions, one per column). Fix: check = { sql = \"SELECT COUNT(*) FROM t\", "
                                "expect = [\"rows\"] }")
        for expression in expect:
            _checked_expression(expression, section, f"{where} check.expect")
    if "data_bytes" in section:
        _checked_expression(section["data_bytes"], section, f"{where} data_bytes")
    return section


def _checked_expression(expression: object, section: Mapping[str, Any], where: str) -> None:
    try:
        _evaluate(expression, section)
    except Exception as exc:  # simpleeval raises many kinds; each is the same mistake here
        raise WorkloadError(f"{where}: {expression!r} cannot be computed ({exc}). Fix: write an expression over "
                            "the section's numbers, e.g. \"tables * table_size\"") from None


def _evaluate(expression: object, section: Mapping[str, Any]) -> float:
    """A number, a size ("2GiB"), or an expression over the section's numbers (simpleeval, never eval)."""
    if isinstance(expression, bool):
        raise ValueError("a true/false is not a number")
    if isinstance(expression, int | float):
        return float(expression)
    names = {k: v for k, v in section.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    with contextlib.suppress(ValueError):
        return float(parse_bytes(str(expression)))
    value = SimpleEval(names=names).eval(str(expression))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("it is not a number")
    return float(value)


def _latency_us(pattern: str | None, text: str) -> float | None:
    found = re.search(pattern, text) if pattern else None
    return float(found.group(1)) * 1000 if found else None
