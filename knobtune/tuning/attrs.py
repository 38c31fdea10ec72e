"""Every key knobtune stores on a study or a trial, in one place.

Study user attributes describe the experiment; trial user attributes hold
what was run and measured. ``optuna-dashboard`` shows them as they are.
"""

# study
TOOL_VERSION = "knobtune_version"
TOOL_COMMIT = "knobtune_commit"  # the checkout's git commit (knobtune.source_commit), when run from one
SYSTEM = "system"
SYSTEM_VERSION = "system_version"
SYSTEM_FILE = "system_file"  # the user's system file a study's system came from (absent: shipped)
DRIVER = "driver"
MACHINE = "machine"
WORKLOAD = "workload"
CAPTURE = "capture"  # a capture's summary (workloads/capture.py: span, sessions, mix, fingerprints; no data)
OBJECTIVE = "objective"
SEARCHED_KNOBS = "searched_knobs"
ALLOW_UNSAFE = "allow_unsafe"
ALLOW_OPERATIONAL = "allow_operational"
LEFT_OUT = "left_out_unsafe"  # knob -> safety class, kept out of the search
DEFAULT_BY_RUNG = "baseline"  # rung index (str) -> the default's run there, on the units machine (stored spelling)
SEED = "seed"
VERIFICATION = "verification"  # the final interleaved repeats, see tuning.finish
WINNER_TRIAL = "winner_trial"  # in VERIFICATION: the verified winner's trial number (None: keep the default)
SETTLED = "settled"  # True: every run's time includes settling the store (False: --unsettled, the raw window)
SCALED_RUNGS = "scaled_rungs"  # True: small rungs ran configs with data-sized knobs scaled (False: --unscaled-rungs)
MEMORY_LIMIT = "memory_limit_bytes"  # --memory-limit, or None
MAX_RECOVERY = "max_recovery_s"  # --max-recovery-time, or None
PRODUCTION = "production"  # --production-data/--production-memory: {data_bytes, memory_bytes, planned_limit_bytes}
ONLY_RUNG = "only_rung"  # a ranking study: every config ran at this rung index only (absent: the whole ladder)
RANKING = "ranking"  # a ranking study: the knob ranking computed from its samples (analysis.ranking.Ranking)
EXPLANATION = "explanation"  # `knobtune explain`: the ablation path from the default to the winner, the minimal config
RANKED_BY = "ranked_by"  # a top-k study: {"study", "top_k", "knobs"}, the ranking its searched knobs came from
SETTINGS = "settings"  # how the study searches (sampler, budget, ladder limits): what a joining worker needs
DEADLINE = "deadline"  # Unix time when the search of a --time budget ends, for every worker (absent: --trials only)
UNITS_MACHINE = "baseline_machine"  # the machine whose default is DEFAULT_BY_RUNG: the study's units
TIME_SPENT = "time_spent"  # this run of `tune`: search_s, verification_s, reserved_s (kept back for it), budget_s,
# reserve_searched (that time went to the search: no config had reached full size)
DIAGNOSIS = "diagnosis"  # the rules read over the default's full-size run, what fired since, the focus (tuning.guide)
MACHINE_PREFIX = "machine:"  # "machine:<name>" -> that machine's facts (tuning.machine), one key per machine

# trial
ROLE = "role"  # ROLE_DEFAULT (the default, first) or ROLE_CONTROL (the default, re-run periodically); absent otherwise
CONFIG = "config"  # the changed knobs actually run (after relation repair)
CONFIG_HASH = "config_hash"
OUTCOME = "outcome"  # an Outcome value
REASON = "reason"
FIX = "fix"  # what to do about a failure of the machine (outcome tool), when known: a full disk's
RUNG_PREFIX = "rung_"  # rung_0, rung_1, ...: measurement summary at that rung
REACHED_RUNG = "reached_rung"
REPAIRED = "repaired"  # relations the sampler's config broke and how they were mended
REUSED_FROM = "reused_from"  # trial number whose measurement was reused
RETRY_OF = "retry_of"  # trial number this one re-runs after an interruption
STARTED_FROM = "started_from"  # a config a new study tried first: a known config's label, or "study S trial N"
WORKER = "worker"  # "host:pid" of the process running the trial
TRIAL_MACHINE = "machine"  # the name of the machine the trial ran on (its rung results: "machine", "ratio")
UNSAFE = "unsafe_knobs"  # knob -> safety class of the values this config holds
PLANNED_MEMORY = "planned_memory_bytes"  # the catalog's memory model applied to this config
INFEASIBLE = "infeasible"  # why a complete trial breaks a limit (recovery time); never the result
RECOVERY_OVER_S = "recovery_over_s"  # full-size recovery time minus --max-recovery-time (<= 0: feasible)
FINDINGS = "findings"  # the diagnosis rules that fired on the trial's full-size run
FOCUSED = "focused"  # the knobs a trial searched within narrowed ranges (tuning.guide), the rest over their own
WARM_UP = "warm_up"  # the default's first trial on a machine: its full-size run before the ladder, not counted
ROLE_DEFAULT = "baseline"  # the stored spelling of earlier releases: the default's first run
ROLE_CONTROL = "control"
CONTROLS = "controls"  # study: the default's full-size value at each of its runs (first and controls), in order (drift)


def rung_key(index: int) -> str:
    return f"{RUNG_PREFIX}{index}"


def is_default(user_attrs: dict) -> bool:
    """Whether a trial (by its user attributes) runs the default config: its first run or a control."""
    return user_attrs.get(ROLE) in (ROLE_DEFAULT, ROLE_CONTROL)


def is_fixed(user_attrs: dict) -> bool:
    """Whether a trial's config was fixed before it was asked for (the default, a start, a retry), not sampled."""
    return is_default(user_attrs) or STARTED_FROM in user_attrs or RETRY_OF in user_attrs
