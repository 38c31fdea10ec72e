"""The bench suite: its questions (bench/questions/*.toml), their results (bench/results/QUESTION/) and
bench/RESULTS.md, generated from the latest result of each question.

A question file says what the question asks, its system, workload, arms, seeds and budget, the bench script and
arguments that answer it, and the script's function that renders one result as Markdown (``table``). The file is
read through knobtune's schema (``QuestionDoc``): a field unknown, missing or of the wrong kind is refused with one
line naming the file, the field and the fix; what its run must agree with (``_check_run``) is checked next.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import re
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import KnobtuneError
from knobtune.file_kinds import FileKind
from knobtune.schema import TEXT, required, setting
from knobtune.systems import SYSTEMS

BENCH = Path(__file__).resolve().parent
QUESTIONS = BENCH / "questions"
RESULTS = BENCH / "results"
RESULTS_MD = BENCH / "RESULTS.md"
RESULT_NAME = re.compile(r"^(\d{8})-([0-9a-f]{7,40})(?:-(\d+))?\.json$")  # DAY-COMMIT.json, DAY-COMMIT-2.json, ...
PYTHON = ".venv/bin/python"


class QuestionError(KnobtuneError):
    """A question file that cannot be used; the message names the file, the field and the fix."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuestionDoc:
    """A question of the bench suite (``bench/questions/NAME.toml``; bench/README.md)."""

    asks: str = required(**TEXT, example="At the same budget, does ... ?", note="the question, one sentence")
    system: str = required(choices=tuple(SYSTEMS), what="a system of knobtune")
    workload: str = required(example="put-get-delete", note="the run's --workload when the run gives one")
    arms: tuple[str, ...] = required(example=["knobtune", "knobtune-alone"], note="what is compared")
    seeds: tuple[int, ...] = required(example=[1, 2, 3], note="each one in the run's arguments")
    budget: str = required(example="10m", note="per arm; \"\" when the bench has none; in the run's arguments")
    run: tuple[str, ...] = required(items="argv", example=["peers.py", "--budget", "10m"],
                                    note="a script of bench/ and its arguments")
    table: str = required(pattern=r"\w+\.\w+", what="a script's function (script.function)", example="peers.table",
                          note="the script's function that renders one result as Markdown")
    issues: tuple[int, ...] = setting((), example=[32], note="the issues it answers")
    takes: str = setting("", example="about 70 minutes", note="how long a run takes, as measured")
    needs: str = setting("", example="SMAC3", note="what must exist before it runs")


FILE_KIND = FileKind("bench question", QuestionDoc, "`bench/questions/NAME.toml`", "bench/README.md")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Question(QuestionDoc):
    """One question of the suite, as its file states it."""

    name: str  # the file's stem: bench/questions/NAME.toml, bench/results/NAME/

    @property
    def script(self) -> Path:
        return BENCH / self.run[0]

    @property
    def command(self) -> str:
        """The one command that answers this question."""
        return f"{PYTHON} bench/run.py {self.name}"

    def script_command(self) -> str:
        return shlex.join([PYTHON, f"bench/{self.run[0]}", *self.run[1:]])

    def renderer(self) -> Callable[[dict[str, Any]], str]:
        module, _, function = self.table.partition(".")
        if str(BENCH) not in sys.path:
            sys.path.insert(0, str(BENCH))  # the scripts import their helpers (_cli, ...) as top-level modules
        render: Callable[[dict[str, Any]], str] = getattr(importlib.import_module(module), function)
        return render


def read_question(path: Path) -> Question:
    """The question in ``path``.

    Raises:
        QuestionError: the file is not TOML, lacks a field, has one it does not know, or one of the wrong kind; its
            script or renderer does not exist; or its workload, budget or seeds are not what its run gives.
    """
    where = f"bench/questions/{path.name}"
    data = read_toml(path, QuestionError, "question")
    document = schema.read(QuestionDoc, data, schema.Where(where, docs="bench/README.md"), QuestionError)
    question = Question(name=path.stem, **{f.name: getattr(document, f.name) for f in dataclasses.fields(QuestionDoc)})
    _check_run(question, where)
    return question


def _check_run(question: Question, where: str) -> None:
    if not question.run or not question.run[0].endswith(".py") or not question.script.is_file():
        raise QuestionError(f"{where}: run must start with a script of bench/ (e.g. \"peers.py\"), not "
                            f"{question.run[:1]}. Fix: name the script first, then its arguments")
    module, dot, function = question.table.partition(".")
    if not dot or not (BENCH / f"{module}.py").is_file() or f"\ndef {function}(" not in (
            BENCH / f"{module}.py").read_text():
        raise QuestionError(f"{where}: table {question.table!r} is no function of a bench script. Fix: name the "
                            "script's function that renders one result, e.g. \"peers.table\"")
    arguments = question.run[1:]
    stated = {"budget": question.budget, **{f"seed {s}": str(s) for s in question.seeds}}
    if "--workload" in arguments:  # a script of one workload takes none
        stated["workload"] = question.workload
    for field, value in stated.items():
        if value and value not in arguments:
            raise QuestionError(f"{where}: {field} {value!r} is not in its run's arguments. Fix: make the run give "
                                "what the file states")
    if any(re.search(r"(^|=)/(work|tmp|root|home|var|srv)/", arg) for arg in arguments):
        raise QuestionError(f"{where}: its run names a path of one machine. Fix: leave studies to a temporary folder "
                            "or bench/run.py's --dir, and give files of the repository by relative paths")


def questions() -> list[Question]:
    """Every question of the suite, in name order.

    Raises:
        QuestionError: one of the files is bad (the first found).
    """
    return [read_question(path) for path in sorted(QUESTIONS.glob("*.toml"), key=lambda path: path.stem)]


def result_files(question: str) -> list[Path]:
    """A question's result files, oldest first (by day, then by when the run ended)."""
    folder = RESULTS / question
    files = [path for path in folder.glob("*.json") if RESULT_NAME.match(path.name)] if folder.is_dir() else []
    return sorted(files, key=lambda path: (path.name[:8], provenance(path).get("ended") or "", path.name))


def provenance(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()).get("provenance") or {})


def latest(question: str) -> Path | None:
    files = result_files(question)
    return files[-1] if files else None


# ---------------------------------------------------------------- RESULTS.md


def machine_line(stamp: dict[str, Any]) -> str:
    """The machine in words: CPU, cores, memory, kernel and OS, storage."""
    m = stamp.get("machine") or {}
    parts = [m.get("cpu_model"), f"{m['cpus']} cores" if m.get("cpus") else None,
             f"{m['memory_gib']} GiB" if m.get("memory_gib") else None,
             f"Linux {m['kernel']}" if m.get("kernel") else None, m.get("distribution"),
             f"disk {m['storage']}" if m.get("storage") else None]
    said = f" ({m['said']})" if m.get("said") else ""
    return (", ".join(p for p in parts if p) or "not recorded") + said


QUIET_WORDS = {True: "quiet", False: "NOT quiet", None: "quietness not measured"}  # a stamp's quiet, in words


def quiet_line(stamp: dict[str, Any]) -> str:
    """Whether the machine was quiet: as measured by the run, or as said when it was not measured."""
    q = stamp.get("quiet") or {}
    verdict = QUIET_WORDS[q.get("quiet")]
    if "outside_cpu_share" in q:
        return (f"{verdict}: processes outside the bench used {q['outside_cpu_share']:.0%} of the machine's CPU while "
                f"it ran (busy time less the bench's waited-for processes: {q['others_cpu_share']:.0%}), the "
                f"hypervisor took {q['steal_share']:.0%}; load average {q['load_before'][0]:.1f} before")
    if "others_cpu_share" in q:
        return (f"{verdict}: the rest of the machine used {q['others_cpu_share']:.0%} of its CPU while it ran, the "
                f"hypervisor took {q['steal_share']:.0%}; load average {q['load_before'][0]:.1f} before")
    return f"{verdict} ({q['said']})" if q.get("said") else verdict


def sittings_line(stamp: dict[str, Any]) -> str:
    """The earlier sittings a resumed run reused steps of (bench/_steps.py): when each started, on which commit,
    and whether the machine was quiet in it."""
    each = [f"{s['started'][:16].replace('T', ' ')} on `{s['commit']}`, "
            f"{QUIET_WORDS[(s.get('quiet') or {}).get('quiet')]}" for s in stamp["sittings"]]
    mine = QUIET_WORDS[(stamp.get("quiet") or {}).get("this_sitting")]
    return (f"resumed: steps of {len(each)} earlier sitting{'s' * (len(each) > 1)} reused ({'; '.join(each)}); "
            f"the last sitting {mine}")


def builds_line(stamp: dict[str, Any], system: str) -> str:
    """The builds of the question's system the result ran (one per build, with the drivers that use it)."""
    builds: dict[str, list[str]] = {}
    for row in stamp.get("systems") or []:
        if row.get("system") == system and row.get("build"):
            builds.setdefault(row["build"], []).append(row.get("driver") or "")
    drivers = {build: ", ".join(d for d in ds if d) for build, ds in builds.items()}
    return "; ".join(f"{build}" + (f" ({drivers[build]})" if drivers[build] else "") for build in builds) or \
        "not recorded"


def section(question: Question) -> str:
    """A question's part of RESULTS.md: what it asks, the command, and its latest result with its stamp."""
    issues = f" (issue {', '.join(map(str, question.issues))})" if question.issues else ""
    lines = [f"## {question.name}", "", f"{question.asks}{issues}", "",
             f"Answered by `{question.command}`, which runs `{question.script_command()}`"
             + (f" ({question.takes})" if question.takes else "") + "."]
    if question.needs:
        lines += ["", f"Needs: {question.needs}"]
    path = latest(question.name)
    if path is None:
        return "\n".join(lines + ["", "No result for the code as it is: run the command above."])
    result = json.loads(path.read_text())
    stamp = result.get("provenance") or {}
    relative = path.relative_to(BENCH).as_posix()
    made = stamp.get("command") or "not recorded"
    how = ("recorded by the run" if stamp.get("recorded")
           else "*adopted*: made outside bench/run.py, stamped later (see its provenance)" if stamp.get("adopted")
           else "*recovered*, not recorded (see its provenance)")
    commit = f"`{stamp.get('commit', 'unknown')}`" + (" with uncommitted changes" if stamp.get("dirty") else "")
    started_from = f" (its runs started from {stamp['runs_started_from']})" if stamp.get("runs_started_from") else ""
    lines += ["", f"Latest result: [{relative}]({relative}), made by `{made}`", "",
              f"- commit {commit}{started_from}, {str(stamp.get('started') or stamp.get('ended') or '')[:10]}; "
              f"stamp {how}",
              *([f"- {sittings_line(stamp)}"] if stamp.get("sittings") else []),
              f"- machine: {machine_line(stamp)}", f"- {quiet_line(stamp)}",
              f"- {question.system}: {builds_line(stamp, question.system)}", "",
              question.renderer()(result)]
    return "\n".join(lines)


def results_md() -> str:
    """bench/RESULTS.md as the results of today's files make it."""
    head = ["# Benchmark results", "",
            "Generated by `.venv/bin/python bench/run.py --results` from the latest result of each question in",
            "bench/questions/; do not edit it by hand. How to run a question, and how to add one: bench/README.md.",
            "What the results taught: docs/findings.md. Unless a table says otherwise, each figure is a ratio of",
            "medians of interleaved runs with its 95% bootstrap interval (knobtune/analysis/stats.py).", "",
            "A stamp marked *recovered* was not recorded by its run: it was pieced together from git (the commit",
            "that added the file) and the dated journal the benches kept before this suite; the result file's",
            "`provenance.recovered` says how. Every RocksDB figure before 2026-11-27's evening ran on Debian's",
            "RocksDB package, which is built with assertions on; later ones on the release build of",
            "scripts/rocksdb-release."]
    asked = questions()
    return "\n\n".join(["\n".join(head), index(asked), verification_rounds(asked), *(section(q) for q in asked)]) + "\n"


def verifications_in(result: Any) -> list[dict[str, Any]]:
    """Every verified candidate a result records with its rounds (``_cli.rounds_of``): from the studies'
    sequential verifications it holds whole when it holds any, else from the figures it kept of them."""
    import _cli

    whole = _found(result, lambda d: "max_rounds" in d and "candidates" in d)
    if whole:
        return [v for d in whole
                if (v := _cli.verified_speedup({"verification": d, "result_trial": d.get("winner_trial")}))]
    return _found(result, lambda d: {"first_look", "rounds", "decision"} <= d.keys())


def _found(value: Any, wanted: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The dicts in ``value`` (nested anywhere) that are ``wanted``, not looking inside those found."""
    if isinstance(value, list):
        return [found for item in value for found in _found(item, wanted)]
    if not isinstance(value, dict):
        return []
    return [value] if wanted(value) else [found for item in value.values() for found in _found(item, wanted)]


def _how_decided(verified: dict[str, Any]) -> str:
    """``futile`` (given up), ``open`` (left open), ``first`` (the first look decided), else what the added rounds
    decided: ``gain`` or ``no gain`` (no gain, or worse)."""
    decision = verified["decision"]
    if decision in ("futile", "open"):
        return decision
    if (verified["rounds"] or 0) <= (verified["first_look"] or 0):
        return "first"
    return "gain" if decision == "gain" else "no gain"


def verification_rounds(asked: list[Question]) -> str:
    """What the verifications' added rounds decided, over the latest results that record them (issue 57): per
    question, the studies' verified candidates (each study's result, or its best candidate when none won)."""
    lines = ["## Verification rounds", "",
             "Each study verifies its candidates against the default in interleaved rounds: a first look of",
             "`--repeats` rounds, then more while a candidate's interval straddles 1 and the budget holds them",
             "(docs/tuning.md, \"Verification and statistics\"). Per question, over its latest result, each study's",
             "verified candidate (its result, or its best when none won): decided by the first look; proven a gain",
             "by the rounds added after it (the verdicts the added rounds changed); given up as unlikely to settle;",
             "or left open when the budget or --max-rounds ended them. Results made before the rounds were",
             "recorded (bench/_cli.py, `rounds_of`) are not counted."]
    rows = ["| question | verified | first look decided | added rounds: a gain | added rounds: no gain or worse "
            "| given up | left open |", "|---|---|---|---|---|---|---|"]
    for question in asked:
        path = latest(question.name)
        found = verifications_in(json.loads(path.read_text())) if path else []
        if found:
            counts = Counter(_how_decided(v) for v in found)
            rows.append(f"| [{question.name}](#{question.name}) | {len(found)} | "
                        + " | ".join(str(counts[how]) for how in ("first", "gain", "no gain", "futile", "open"))
                        + " |")
    if len(rows) == 2:
        return "\n".join(lines + ["", "No latest result records them yet."])
    return "\n".join(lines + [""] + rows)


def index(asked: list[Question]) -> str:
    """One row per question: its latest result's day, commit, stamp and whether the machine was quiet."""
    rows = ["| question | latest result | commit | stamp | machine quiet |", "|---|---|---|---|---|"]
    for question in asked:
        path = latest(question.name)
        if path is None:
            rows.append(f"| [{question.name}](#{question.name}) | none yet | | | |")
            continue
        stamp = provenance(path)
        kind = "recorded" if stamp.get("recorded") else "adopted" if stamp.get("adopted") else "recovered"
        quiet = {True: "yes", False: "no", None: "not measured"}[(stamp.get("quiet") or {}).get("quiet")]
        rows.append(f"| [{question.name}](#{question.name}) | {path.name[:8]} | `{stamp.get('commit')}` | {kind} "
                    f"| {quiet} |")
    return "\n".join(rows)


def write_results_md() -> Path:
    RESULTS_MD.write_text(results_md())
    return RESULTS_MD


# ---------------------------------------------------------------- adopting a result made outside the runner


def adopt(question: Question, source: Path, stamp: dict[str, Any]) -> Path:
    """Copy a result file made outside bench/run.py into the question's folder with ``stamp`` as its provenance
    (it must name its commit); the file is named by the day it started and that commit.

    Raises:
        QuestionError: the file is not a JSON object, or the stamp names no commit.
    """
    try:
        result = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise QuestionError(f"{source}: not a result file ({exc}). Fix: give the JSON a bench wrote") from None
    if not isinstance(result, dict) or not stamp.get("commit"):
        raise QuestionError(f"{source}: a result needs a JSON object and a commit. Fix: give --commit")
    day = str(stamp.get("started") or stamp.get("ended") or datetime.date.today())[:10].replace("-", "")
    folder = RESULTS / question.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{day}-{stamp['commit'][:7]}.json"
    result["provenance"] = stamp | {"question": question.name}
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return path
