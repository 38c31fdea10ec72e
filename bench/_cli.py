"""The benchmarks run knobtune as users do: its installed command, one process per step."""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import _stamp
import _steps

KNOBTUNE = str(Path(sys.executable).with_name("knobtune"))  # the entry point installed beside this Python
# research.earlier_studies = false: each study on its own (tuning/loop/earlier.py)
EARLIER_OFF = ("--no-earlier-studies",)
_LAST_STEP_S = 0.0  # the time of the last command run (``last_step_s``)
_NAMED: dict[str, str] = {}  # this run's own folders (its studies folders), by the name its result gives them
# knobtune's status when stopped (Ctrl-C 130, SIGTERM 143), and a child's killed by either before it could say so
_STOPPED = {130, 143, -signal.SIGINT, -signal.SIGTERM}


class Stopped(KeyboardInterrupt):
    """A knobtune command was stopped (Ctrl-C or SIGTERM), not failed: the bench stops with it rather than record
    what it was measuring as failed and go on (a ``except SystemExit`` does not catch it). The steps that ended are
    kept, so ``bench/run.py QUESTION --resume`` goes on from this one (bench/_steps.py)."""


def named_folder(folder: Path) -> Path:
    """``folder``, which this run's result names by its own name (the first "DIR", others "DIR2", ...) rather than
    by its path on this machine (``portable``); a folder inside one already named needs no name of its own."""
    paths = {str(folder), str(folder.resolve())}
    if not any(path == known or path.startswith(known + "/") for path in paths for known in _NAMED):
        name = "DIR" if not _NAMED else f"DIR{len(set(_NAMED.values())) + 1}"
        _NAMED.update(dict.fromkeys(paths, name))
    return folder


def knobtune(*args: str, home: Path | None = None, earlier_studies: bool = False) -> str:
    """Run one knobtune command (in the studies folder ``home``); its standard output (progress goes to the terminal).
    A `tune` never learns from earlier studies (``EARLIER_OFF``): a result must not depend on what ran before it;
    ``earlier_studies`` lets it, as a user's `tune` does (the bench that measures what they give, earlier_studies.py).

    Raises:
        SystemExit: the command failed; its status and the end of its output say why.
        Stopped: the command was stopped (Ctrl-C, SIGTERM).
    """
    global _LAST_STEP_S
    if home is not None:
        named_folder(home)
    off = args[:1] == ("tune",) and not earlier_studies
    argv = [KNOBTUNE, *args, *(["--dir", str(home)] if home else []), *(EARLIER_OFF if off else ())]
    if home is not None and (kept := _steps.reused(home, args)) is not None:
        print("$ knobtune", " ".join(args), "(ended in an earlier sitting: its output reused)", flush=True)
        _LAST_STEP_S = kept[1]
        return kept[0]
    print("$ knobtune", " ".join(args), flush=True)
    if home is not None and _steps.resuming() and args[:1] == ("tune",) and "--study" in args \
            and _steps.forget_study(home, args[args.index("--study") + 1]):
        print("  (its study, left half-searched by a stopped sitting, removed: it runs anew)", flush=True)
    started = time.monotonic()
    result = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    _LAST_STEP_S = time.monotonic() - started
    if result.returncode in _STOPPED:
        raise Stopped(f"knobtune {args[0]} was stopped (status {result.returncode}): the bench stops with it; "
                      "`bench/run.py QUESTION --resume` goes on from this step")
    if result.returncode != 0:
        raise SystemExit(f"knobtune {args[0]} failed (status {result.returncode}): {result.stdout[-2000:]}")
    if home is not None:
        _steps.record(home, args, result.stdout, _LAST_STEP_S)
    return result.stdout


def last_step_s() -> float:
    """The seconds the last knobtune command took, run now or in the earlier sitting whose output was reused."""
    return _LAST_STEP_S


def knobtune_json(*args: str, home: Path | None = None, earlier_studies: bool = False) -> dict:
    """Run one knobtune command with ``--json``; its parsed output (see ``knobtune``)."""
    import json

    return json.loads(knobtune(*args, "--json", home=home, earlier_studies=earlier_studies))


def result_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every bench script takes: ``--out`` (where its result goes) and ``--table`` (print a result)."""
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, metavar="RESULT", help="print a result file as a Markdown table")


def studies_main(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], dict],
                 table: Callable[[dict], str]) -> None:
    """The end of a bench script that runs studies: ``--seed``, ``--dir`` (its studies folder, named ``DIR`` in the
    result), ``--out`` and ``--table``; then either the table of a result, or ``run`` emitted."""
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="studies folder (default: a new temporary one)")
    result_arguments(parser)
    args = parser.parse_args()
    if not printed_table(args, table):
        if args.dir:
            named_folder(args.dir)  # before its steps name folders inside it
        with ends_when_stopped():
            result = run(args)
        emit(result, args.out)


def emit_in_studies_folder(args: argparse.Namespace, run: Callable[[argparse.Namespace, Path], dict], prefix: str,
                           resumes: bool = False) -> None:
    """Run ``run`` in the studies folder ``args.dir`` (named ``DIR`` in the result), or in a new temporary one, and
    emit its result to ``args.out``. A ``--dir`` that holds anything is refused, as a study of the same name there
    would be resumed rather than run afresh, unless the bench ``resumes`` and is being resumed."""
    if args.dir and args.dir.exists() and any(args.dir.iterdir()) and not (resumes and _steps.resuming()):
        raise SystemExit(f"--dir {args.dir} is not empty: a study of the same name there would be resumed, not run "
                         "afresh. Fix: give an empty or new folder")
    with ends_when_stopped(), tempfile.TemporaryDirectory(prefix=prefix) as folder:
        result = run(args, named_folder(args.dir or Path(folder)))
    emit(result, args.out)


@contextlib.contextmanager
def ends_when_stopped() -> Iterator[None]:
    """A stopped knobtune command (``Stopped``) ends the script with its one line and status 130, not a traceback
    (its temporary folders are removed on the way out)."""
    try:
        yield
    except Stopped as stop:
        print(stop, file=sys.stderr)
        raise SystemExit(130) from None


def printed_table(args: argparse.Namespace, table: Callable[[dict], str]) -> bool:
    """With ``--table RESULT``: that result printed by ``table`` (True: the script has nothing more to do)."""
    if not args.table:
        return False
    import json

    print(table(json.loads(args.table.read_text())))
    return True


def result_path(out: Path | None) -> Path | None:
    """Where a result given ``--out`` goes: ``out`` itself, or, when ``out`` is a folder (one that exists or a path
    ending in /), ``DAY-COMMIT.json`` in it (bench/results/QUESTION/ is such a folder)."""
    if out is None:
        return None
    if out.is_dir() or str(out).endswith("/"):
        return out / _stamp.result_name()
    return out


def portable(text: str, names: Mapping[str, str] | None = None) -> str:
    """``text`` without this machine's paths: each folder of ``names`` by its name (a studies folder given with
    --dir: "DIR"), the repository's own files relative to it, the user's home as ``~`` (a result is read on other
    machines, bench/README.md). The longest folders are named first, so a folder inside another keeps its own
    name."""
    for folder, name in sorted((names or {}).items(), key=lambda item: -len(item[0])):
        text = text.replace(folder, name)
    repo, home = str(Path(__file__).resolve().parents[1]), str(Path.home())
    return text.replace(repo + "/", "").replace(repo, ".").replace(home + "/", "~/")


def emit(result: dict, out: Path | None, names: Mapping[str, str] | None = None) -> None:
    """Print a benchmark's result as JSON with its provenance (``_stamp``: the commit, the machine and whether it
    was quiet, every system's build), and write it to ``out`` when given (a folder: see ``result_path``); the
    paths in it are written as ``portable`` says, ``names`` naming folders of the run's own (every studies folder
    a step ran in is named too: ``named_folder``). A resumed run's stamp
    names the earlier sittings whose steps it reused (``_steps.earlier_sittings``)."""
    import json

    path = result_path(out)
    stamp = _stamp.stamp(path, _steps.earlier_sittings())
    text = portable(json.dumps({**result, "provenance": stamp}, indent=1, default=str), {**_NAMED, **(names or {})})
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    print(text)
    if path:
        print(f"wrote {path}", flush=True)


def save_so_far(result: dict, out: Path | None) -> None:
    """Write the result so far to ``out`` when given (a folder: see ``result_path``), its paths named as ``emit``
    names them; no provenance yet: ``emit`` adds it at the end. A run stopped early leaves this file."""
    import json

    if path := result_path(out):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(portable(json.dumps(result, indent=1, default=str), _NAMED) + "\n")


def interval(figure: dict | None, missing: str = "-") -> str:
    """A ratio with its 95% interval as the tables show it, ``1.23x (1.10-1.36)``; ``missing`` when there is none."""
    return f"{figure['ratio']:.2f}x ({figure['ci_low']:.2f}-{figure['ci_high']:.2f})" if figure else missing


def compared_speedup(candidate: dict) -> dict:
    """One candidate of a ``compare --json`` as the benches record it: why it has no speedup (its failure, or that
    none was measured), else its speedup over the comparison's reference (ratio, 95% CI, p-value) and
    whether that is beyond the noise."""
    speedup = candidate.get("speedup")
    if candidate.get("failure") or not speedup:
        return {"failure": candidate.get("failure") or "no speedup measured"}
    return {key: speedup.get(key) for key in ("ratio", "ci_low", "ci_high", "p_value")} | {
        "significant": candidate.get("significant")}


def verified_speedup(summary: dict) -> dict | None:
    """The verified speedup of a study's result from ``tune --json`` or ``show --json``: its ratio to the default,
    95% CI and p-value, and ``won`` (beyond the noise: the study's result); when nothing won, the best candidate's
    figures with ``won`` False. None when nothing was verified.

    A sequential verification adds how it went (``rounds_of``): the rounds of its first look, the rounds this
    candidate ran, its decision and why the rounds stopped."""
    verification = summary.get("verification") or {}
    candidates = [c for c in verification.get("candidates", []) if c.get("speedup") and not c.get("reference")]
    if not candidates:
        return None
    result = f"trial {summary['result_trial']}" if summary.get("result_trial") is not None else None
    chosen = next((c for c in candidates if c["label"] == result), None) or max(candidates,
                                                                              key=lambda c: c["speedup"]["ratio"])
    figures = {key: chosen["speedup"].get(key) for key in ("ratio", "ci_low", "ci_high", "p_value")}
    return {"label": chosen["label"], **figures, "won": chosen["label"] == result,
            **rounds_of(verification, chosen)}


def rounds_of(verification: dict, candidate: dict) -> dict:
    """How a sequential verification went for ``candidate`` (one of its candidates): ``first_look`` (its first
    look's rounds), ``rounds`` (the candidate's own), ``decision`` (gain, worse, no gain, open or futile) and
    ``stopped`` (why the rounds ended); empty for a fixed comparison (an earlier release's)."""
    if "max_rounds" not in verification:
        return {}
    return {"first_look": verification.get("repeats"), "rounds": candidate["speedup"].get("rounds"),
            "decision": candidate["speedup"].get("decision"), "stopped": verification.get("stopped")}


def best_so_far(points: list[tuple[float, float]], maximize: bool) -> list[tuple[float, float]]:
    """(time, the best value up to that time) at each of ``points`` (time, value), in time order."""
    timeline: list[tuple[float, float]] = []
    for at, value in sorted(points):
        best = timeline[-1][1] if timeline else value
        timeline.append((at, max(best, value) if maximize else min(best, value)))
    return timeline


def study_timeline(home: Path, study_name: str, maximize: bool, offset_s: float = 0.0) -> list[tuple[float, float]]:
    """(seconds since the study's first trial began, plus ``offset_s``; best full-size value so far) at each
    full-size trial's end, from a study in the studies folder ``home``."""
    import optuna
    from optuna.trial import TrialState

    from knobtune.tuning import attrs

    study = optuna.load_study(study_name=study_name, storage=f"sqlite:///{home / 'studies.db'}")
    # complete trials only: a pruned or failed trial's value is a smaller rung's (or a pessimistic stand-in)
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if not attrs.is_default(t.user_attrs) and attrs.INFEASIBLE not in t.user_attrs]
    start = min(t.datetime_start for t in study.get_trials(deepcopy=False) if t.datetime_start)
    return best_so_far([(offset_s + (t.datetime_complete - start).total_seconds(), t.value) for t in trials], maximize)


def as_speedups(timeline: list[tuple[float, float]], default: float, maximize: bool) -> list[tuple[float, float]]:
    """A timeline of values as speedups over ``default`` (> 1: better than it)."""
    return [(at, value / default if maximize else default / value) for at, value in timeline]


def first_reached_s(timeline: list[tuple[float, float]], fraction: float, maximize: bool) -> float | None:
    """When a best-so-far timeline first came within ``fraction`` (0.95: 95%) of its own final best; None if empty."""
    if not timeline:
        return None
    best = timeline[-1][1]
    goal = best * fraction if maximize else best / fraction
    return next(at for at, value in timeline if (value >= goal if maximize else value <= goal))
