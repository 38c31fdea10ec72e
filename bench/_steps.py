"""A bench's steps kept in its studies folder, so that a run stopped before its end goes on where it stopped.

The long questions (an hour of reference studies per workload, two hours of Cassandra) outlast a sitting of the
machine. Every knobtune command such a bench runs in its studies folder (``_cli.knobtune`` with ``home``) is a
step: when it ends, its output is added to ``DIR/bench-steps.json`` with the sitting it ran in (the commit, when
the sitting started, whether the machine was quiet until then). ``bench/run.py QUESTION --dir DIR --resume`` runs
the script again with ``RESUME_ENV`` set: a step that ended gives its stored output instead of running again; a
`tune` that did not end runs anew, its half-searched study removed first (its budget was the stopped sitting's);
a `rank` goes on down its own design, as it does for a user. The steps are run in the order the script asks for
them, so a script whose later steps depend on earlier outputs asks for the same steps again.

A bench keeps steps and may resume only when its figures come from its steps' outputs, the studies' own records
and the steps' times as ``_cli.last_step_s`` gives them (stored with each step), never from its own clock: it
says so with ``RESUMES = True`` (``resumes``). A resumed result names every earlier sitting in its stamp, and the
machine was quiet only if it was in each. Resuming refuses a folder whose steps ran on code other than today's
(``resume_problem``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import _stamp

FILE = "bench-steps.json"
RESUME_ENV = "KNOBTUNE_BENCH_RESUME"  # set by bench/run.py --resume: steps that ended are not run again
# what a result does not depend on: results, the generated RESULTS.md, prose, and the test modules (tests/*.py; a
# bench imports only tests/apps, the applications the tests capture too)
NOT_CODE = (":(exclude)bench/results", ":(exclude)bench/RESULTS.md", ":(exclude)docs", ":(exclude)*.md",
            ":(exclude,glob)tests/*.py")


def _load(home: Path) -> dict[str, Any]:
    path = home / FILE
    return json.loads(path.read_text()) if path.is_file() else {"steps": {}, "sittings": {}}


_ASKED: dict[str, int] = {}  # how many times this run asked for each command so far
_REUSED: dict[str, dict[str, Any]] = {}  # the earlier sittings whose steps this run reused, by their start


def _key(args: tuple[str, ...], ask: bool = False) -> str:
    """A step's key: its command and which time this run asks for it (a bench may run one command several times,
    as repeats: each is a step of its own)."""
    command = json.dumps(list(args))
    if ask:
        _ASKED[command] = _ASKED.get(command, 0) + 1
    return json.dumps([list(args), _ASKED.get(command, 1)])


def _sitting() -> str:
    return _stamp.STARTED["at"].isoformat(timespec="seconds")


def resumes(script: Path) -> bool:
    """Whether the bench script may resume (it says ``RESUMES = True``: see above)."""
    return script.suffix == ".py" and script.is_file() and \
        any(line.startswith("RESUMES = True") for line in script.read_text().splitlines())


# whether this process's steps are kept: only a script that may resume keeps them (another's --dir may be a user's
# studies folder, read again and again)
KEEPS = resumes(Path(sys.argv[0]))


def resuming() -> bool:
    """Whether this run goes on from the steps a stopped one kept (bench/run.py --resume)."""
    return os.environ.get(RESUME_ENV) == "1"


def reused(home: Path, args: tuple[str, ...]) -> tuple[str, float] | None:
    """The stored output of the step ``args`` (asked for once more) and the seconds it took, when this run resumes
    and an earlier sitting ended it, else None. Called once before each step is run, as ``record`` after."""
    key = _key(args, ask=True)
    if not resuming():
        return None
    kept = _load(home)
    step = kept["steps"].get(key)
    if step is None:
        return None
    _REUSED[step["sitting"]] = kept["sittings"].get(step["sitting"], {})
    return step["stdout"], step["elapsed_s"]


def record(home: Path, args: tuple[str, ...], stdout: str, elapsed_s: float) -> None:
    """Keep the output of the step ``args`` that just ended and its time, and what is known of this sitting (only
    in a script that may resume: ``KEEPS``)."""
    if not KEEPS:
        return
    kept = _load(home)
    kept["steps"][_key(args)] = {"stdout": stdout, "elapsed_s": round(elapsed_s, 1), "sitting": _sitting()}
    kept["sittings"][_sitting()] = {"commit": _stamp.STARTED["commit"], "dirty": _stamp.STARTED["dirty"],
                                    "quiet": _stamp.quiet()}
    home.mkdir(parents=True, exist_ok=True)
    temporary = home / f".{FILE}.tmp"
    temporary.write_text(json.dumps(kept, indent=1) + "\n")
    os.replace(temporary, home / FILE)  # whole or not at all: a sitting may end at any moment


def earlier_sittings() -> list[dict[str, Any]]:
    """The earlier sittings whose steps this run reused: when each started, its commit, its quietness."""
    return [{"started": started, **sitting} for started, sitting in sorted(_REUSED.items())]


def resume_problem(home: Path, resume: bool, script: Path) -> str | None:
    """Why running the bench ``script`` in the studies folder ``home`` must not start (one line with the fix), or
    None."""
    kept = _load(home)
    if resume and not resumes(script):
        return (f"bench/{script.name} cannot resume: some of its figures are times it measures itself. Fix: run it "
                "without --resume, in a new --dir")
    if not kept["steps"]:
        return None
    if not resume:
        return (f"{home} holds the steps of an earlier run of a bench ({FILE}). Fix: add --resume to go on from "
                "them, or give another --dir")
    for commit in sorted({s["commit"] for s in kept["sittings"].values()}):
        if _changed(commit):
            return (f"the steps in {home} ran on commit {commit}, and the code has changed since. Fix: resume from "
                    f"a checkout of {commit} (git worktree add), or give another --dir")
    return None


def _changed(commit: str) -> bool:
    """Whether the code here (not results, RESULTS.md, prose or test modules; uncommitted changes included) differs
    from ``commit``'s."""
    ran = subprocess.run(["git", "-C", str(_stamp.REPO), "diff", "--quiet", commit, "--", ".", *NOT_CODE],
                         capture_output=True, check=False)
    return ran.returncode != 0


def forget_study(home: Path, name: str) -> bool:
    """Remove the study ``name`` (its trials and its artifacts) from the studies folder ``home``, when it is there:
    when resuming, the study of a `tune` step that did not end was left half-searched by a stopped sitting. True
    when there was one."""
    import optuna

    from knobtune.storage import open_store

    store = open_store(home)
    storage = store.storage()
    if name not in {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}:
        return False
    optuna.delete_study(study_name=name, storage=storage)
    shutil.rmtree(store.artifacts(name), ignore_errors=True)
    return True
