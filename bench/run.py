"""Run one question of the bench suite, or regenerate bench/RESULTS.md (bench/README.md says more).

    .venv/bin/python bench/run.py --list                 # the questions, what each asks and how long it takes
    .venv/bin/python bench/run.py peers                  # run one: bench/results/peers/DAY-COMMIT.json, RESULTS.md
    .venv/bin/python bench/run.py peers --dir STUDIES    # keep its studies in STUDIES (default: a temporary folder)
    .venv/bin/python bench/run.py peers --dir STUDIES --resume   # go on after a run there stopped (bench/_steps.py)
    .venv/bin/python bench/run.py --results              # regenerate bench/RESULTS.md from the stored results
    .venv/bin/python bench/run.py --adopt peers FILE --commit ccf6e1e --quiet yes --note "..."   # made outside it

A question runs its script (bench/questions/QUESTION.toml: ``run``) with ``--out`` pointing into its results
folder; the script's ``emit`` stamps the result with the commit, the machine, whether it was quiet and every
system's build. ``--adopt`` takes a result file a bench wrote without the runner (run by hand from a checkout of
COMMIT on this machine): its stamp gives that commit, this machine's facts and builds as read now, and says it
was adopted, with the note.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import _stamp
import _steps
import suite
from knobtune.server.process import stop_group

STOP_WAIT_S = 60.0  # a stopped study ends its run and stops its servers first


def shown(path: Path) -> str:
    """A path as the repository names it (relative), or whole when it lies outside."""
    return str(path.relative_to(suite.BENCH.parent)) if path.is_relative_to(suite.BENCH.parent) else str(path)


def run_question(question: suite.Question, studies: Path | None, resume: bool = False) -> int:
    """Run the question's script; its exit status. Its result goes to bench/results/QUESTION/DAY-COMMIT.json.
    ``resume``: the steps a stopped run ended in ``studies`` are not run again (bench/_steps.py)."""
    folder = suite.RESULTS / question.name
    folder.mkdir(parents=True, exist_ok=True)
    for partial in filter(stopped_partial, folder.glob("*.json") if resume else ()):
        partial.unlink()  # the stopped run's runs so far: this run writes them again, with the rest
    out = folder / _stamp.result_name()
    for n in range(2, 100):
        if not out.exists():
            break
        out = folder / _stamp.result_name().replace(".json", f"-{n}.json")
    extra = ["--dir", str(studies)] if studies else []
    env = os.environ | {_stamp.QUESTION_ENV: question.name,
                        _stamp.COMMAND_ENV: question.command + (" --dir DIR" if studies else "")}
    if resume:
        env[_steps.RESUME_ENV] = "1"
    print(f"$ {' '.join([question.script_command(), *extra, '--out', shown(out)])}", flush=True)
    returncode = run_whole([sys.executable, str(question.script), *question.run[1:], *extra, "--out", str(out)], env)
    if returncode == 0 and out.exists():
        print(f"wrote {shown(suite.write_results_md())}")
    return returncode


def stopped_partial(path: Path) -> bool:
    """Whether a result file is the runs so far of a run that stopped (scripts write those as they go; a result
    gets its provenance at its end)."""
    try:
        return "provenance" not in json.loads(path.read_text())
    except (OSError, ValueError):
        return True


def run_whole(argv: list[str], env: dict[str, str]) -> int:
    """Run a bench script in a process group of its own; its exit status. When the runner is stopped (SIGTERM,
    SIGINT), the group gets SIGTERM, so the script and what it started (knobtune, which stops its servers) end
    with it instead of running on unseen (SIGKILL after ``STOP_WAIT_S``)."""
    process = subprocess.Popen(argv, env=env, start_new_session=True)

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        return process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        stop_group(process, signal.SIGTERM, wait_s=STOP_WAIT_S)  # nothing when it ended by itself


def adopted_stamp(source: Path, commit: str, note: str, quiet: bool | None) -> dict:
    """A stamp for a result made by hand on this machine from a checkout of ``commit``: the machine's facts and
    builds as read now, the file's time as its end; quietness as the person adopting it says (not measured)."""
    ended = datetime.datetime.fromtimestamp(source.stat().st_mtime, datetime.timezone.utc)
    return {"recorded": False, "adopted": f"made outside bench/run.py and adopted {datetime.date.today()}: the "
                                         "machine's facts and builds were read at adoption, on the machine that "
                                         f"ran it; {note}".rstrip("; "),
            "command": note_command(note), "commit": commit, "dirty": False,
            "started": None, "ended": ended.isoformat(timespec="seconds"),
            "machine": _stamp.machine(),
            "quiet": {"quiet": quiet, "said": "said at adoption, not measured" if quiet is not None else None},
            "systems": _stamp.systems()}


def note_command(note: str) -> str | None:
    """The command a note quotes between backticks, if any."""
    parts = note.split("`")
    return parts[1] if len(parts) >= 3 else None


def takes_dir(script: Path) -> bool:
    """Whether a bench script takes --dir, as its own --help says (its text may name --dir for a command it runs)."""
    usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=False)
    return "--dir" in usage.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("question", nargs="?", help="the question to run (bench/questions/QUESTION.toml)")
    parser.add_argument("--dir", type=Path, help="the studies folder given to the script (default: its own)")
    parser.add_argument("--resume", action="store_true", help="with --dir: go on from the steps a stopped run of "
                        "the question ended there (a sitting that ended first), instead of running them again")
    parser.add_argument("--list", action="store_true", help="list the questions")
    parser.add_argument("--results", action="store_true", help="regenerate bench/RESULTS.md")
    parser.add_argument("--adopt", nargs=2, metavar=("QUESTION", "FILE"),
                        help="take FILE, a result made without the runner, as QUESTION's latest result")
    parser.add_argument("--commit", help="with --adopt: the commit the result's runs started from")
    parser.add_argument("--note", default="", help="with --adopt: how it ran (quote its command in backticks)")
    parser.add_argument("--quiet", choices=("yes", "no"), help="with --adopt: whether the machine was quiet")
    args = parser.parse_args()
    try:
        questions = {q.name: q for q in suite.questions()}
    except suite.QuestionError as exc:
        raise SystemExit(str(exc)) from None
    if args.list:
        for q in questions.values():
            print(f"{q.name}: {q.asks}" + (f" ({q.takes})" if q.takes else ""))
        return
    if args.results:
        print(f"wrote {shown(suite.write_results_md())}")
        return
    name = args.adopt[0] if args.adopt else args.question
    if name not in questions:
        raise SystemExit(f"no question {name!r} in bench/questions/. Fix: one of {', '.join(questions)} "
                         "(bench/run.py --list)")
    question = questions[name]
    if args.adopt:
        if not args.commit:
            raise SystemExit("--adopt needs --commit: the commit the result's runs started from. Fix: add --commit")
        source = Path(args.adopt[1])
        if not source.is_file():
            raise SystemExit(f"--adopt: no file {source}. Fix: give the JSON file the bench wrote")
        try:
            path = suite.adopt(question, source, adopted_stamp(source, args.commit, args.note,
                                                               None if args.quiet is None else args.quiet == "yes"))
        except suite.QuestionError as exc:
            raise SystemExit(str(exc)) from None
        print(f"wrote {shown(path)}")
        print(f"wrote {shown(suite.write_results_md())}")
        return
    if args.dir and not takes_dir(question.script):
        raise SystemExit(f"bench/{question.run[0]} takes no --dir. Fix: run {question.name} without it")
    if args.resume and not args.dir:
        raise SystemExit("--resume goes on from the steps kept in a studies folder. Fix: add --dir DIR, the folder "
                         "of the stopped run")
    if args.dir and (problem := _steps.resume_problem(args.dir, args.resume, question.script)):
        raise SystemExit(problem)
    raise SystemExit(run_question(question, args.dir, args.resume))


if __name__ == "__main__":
    main()
