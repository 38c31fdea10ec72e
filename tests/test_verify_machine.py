"""A failure of the machine during verification is never the candidate's fault: the run is repeated, and a machine
that keeps failing leaves the verdict saying the verification could not finish here.

The runs are real db_bench runs; the machine's failure is injected in front of chosen runs (a RunFailure of kind
TOOL, as a removed scratch folder or a full disk gives).
"""

from __future__ import annotations

from pathlib import Path

from knobtune.knobs import load_catalog
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.tuning.proof import MACHINE_RETRIES, Candidate, run_interleaved, verdict

from conftest import tiny

CATALOG = load_catalog("rocksdb")
CANDIDATE = {"block_size": 16384}


def _compare(tmp_path: Path, failing_runs: set[int]):  # noqa: ANN202
    """The default against one candidate, 2 interleaved runs each; the runs numbered in ``failing_runs`` (from 0,
    retries counted) fail as the machine would."""
    workload = tiny("put-get-delete", 1000)
    target = make_target(CATALOG, workload, tmp_path / "scratch", "db_bench")
    real_run, calls = target.run, [0]

    def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        number, calls[0] = calls[0], calls[0] + 1
        if number in failing_runs:
            raise RunFailure(FailureKind.TOOL, "the scratch folder vanished (injected)")
        return real_run(*args, **kwargs)

    target.run = run  # type: ignore[method-assign]
    with target:
        return run_interleaved(target, [(Candidate("default", {}), CATALOG.defaults()),
                                        (Candidate("trial 1", CANDIDATE, trial=1), CATALOG.config(CANDIDATE))],
                               workload.full, repeats=2, objective=workload.objective, seed=1, log_dir=tmp_path / "v")


def test_a_run_the_machine_failed_is_run_again_and_counts_nothing_against_the_candidate(tmp_path: Path) -> None:
    comparison = _compare(tmp_path, failing_runs={1})  # the candidate's first run
    candidate = comparison.runs[1]
    assert candidate.failure is None and candidate.retries == 1 and len(candidate.values) == 2
    assert comparison.machine_failure is None and "trial 1" in comparison.speedups


def test_a_machine_that_keeps_failing_leaves_no_verdict_on_the_candidate(tmp_path: Path) -> None:
    comparison = _compare(tmp_path, failing_runs=set(range(1, 2 + MACHINE_RETRIES)))  # every try of its first run
    candidate = comparison.runs[1]
    assert candidate.failure is not None and candidate.failure.kind is FailureKind.TOOL
    assert not candidate.failure.config_fault and candidate.retries == MACHINE_RETRIES
    assert comparison.machine_failure is candidate.failure and comparison.winner() is None
    said = verdict(comparison)
    assert said.startswith("the verification could not finish on this machine: the scratch folder vanished")
    assert "not the config's fault" in said and "keep the default" in said
    stored = comparison.to_dict()
    assert stored["winner_trial"] is None and stored["candidates"][1]["failure_kind"] == "tool"
