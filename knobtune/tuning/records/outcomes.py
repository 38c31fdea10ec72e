"""The one place that maps what happened in a trial to its Optuna state."""

from __future__ import annotations

import enum

from optuna.trial import TrialState

from knobtune.targets import FailureKind


class Outcome(enum.StrEnum):
    COMPLETE = "complete"  # ran every rung
    PRUNED = "pruned"  # successive halving stopped it at a rung
    TIMEOUT = "timeout"  # ran longer than the limit relative to the default
    BUDGET = "budget"  # the study's time budget ended before its next rung, or stopped it
    REFUSED = "refused"  # the system rejected the config
    CRASH = "crash"  # the system died under the config
    DATA_LOSS = "data-loss"  # the workload read back less than it wrote
    MEMORY = "memory"  # planned or measured above --memory-limit
    TOOL = "tool"  # the machine or knobtune failed: not the config's fault
    INTERRUPTED = "interrupted"  # knobtune was stopped mid-trial; the config is queued again

    @property
    def state(self) -> TrialState:
        if self is Outcome.COMPLETE:
            return TrialState.COMPLETE
        if self in (Outcome.TOOL, Outcome.INTERRUPTED):
            return TrialState.FAIL  # says nothing about the config: the sampler ignores it
        # stopped early with its last rung's value, or (a failure the config caused: timeout, refusal, crash,
        # data loss, memory) with a value worse than the default's at that rung: the sampler learns to avoid
        # it, the pruner compares with it, and it is never the best
        return TrialState.PRUNED

    @property
    def config_fault(self) -> bool:
        """Whether the outcome says something about the config (and may be reused for the same config)."""
        return self not in (Outcome.TOOL, Outcome.INTERRUPTED, Outcome.BUDGET)

    @classmethod
    def of_failure(cls, kind: FailureKind) -> Outcome:
        return {
            FailureKind.REFUSED: cls.REFUSED,
            FailureKind.TIMEOUT: cls.TIMEOUT,
            FailureKind.CRASH: cls.CRASH,
            FailureKind.DATA_LOSS: cls.DATA_LOSS,
            FailureKind.MEMORY: cls.MEMORY,
            FailureKind.TOOL: cls.TOOL,
        }[kind]
