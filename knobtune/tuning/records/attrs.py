"""Every key knobtune stores on a study or a trial, in one place.

Study user attributes describe the experiment; trial user attributes hold
what was run and measured. ``optuna-dashboard`` shows them as they are.
"""

# study: the experiment as asked (tuning.document.sections), rewritten by each `tune` (a resume may change its budget)
EXPERIMENT = "experiment"
# study: what happened, written once when the study is new
TOOL_VERSION = "knobtune_version"
TOOL_COMMIT = "knobtune_commit"  # the checkout's git commit (knobtune.source_commit), when run from one
SYSTEM = "system"
SYSTEM_VERSION = "system_version"
SYSTEM_FILE = "system_file"  # the user's system file a study's system came from (absent: shipped)
MACHINE = "machine"
WORKLOAD = "workload"
CAPTURE = "capture"  # a capture's summary (workloads/capture.py: span, sessions, mix, fingerprints; no data)
SEARCHED_KNOBS = "searched_knobs"
LEFT_OUT = "left_out_unsafe"  # knob -> safety class, kept out of the search
DEFAULT_BY_RUNG = "default_by_rung"  # rung index (str) -> the default's run there, on the units machine; read with
# default_by_rung()
VERIFICATION = "verification"  # the final interleaved repeats, see tuning.proof.finish
WINNER_TRIAL = "winner_trial"  # in VERIFICATION: the verified winner's trial number (None: keep the default)
RUNGS_RUN_SCALED = "rungs_run_scaled"  # what happened: small rungs ran configs with data-sized knobs scaled, or not
# (what was asked: the experiment's research.scale_rungs); read with rungs_run_scaled()
PLANNED_LIMIT = "planned_limit_bytes"  # what happened: the production ratio's planned memory on the benchmark's data
RANKING = "ranking"  # a ranking study: the knob ranking computed from its samples (analysis.ranking.Ranking)
EXPLANATION = "explanation"  # `knobtune explain`: the ablation path from the default to the winner, the minimal config
RANKED_BY = "ranked_by"  # a top-k study: {"study", "top_k", "knobs"}, the ranking its searched knobs came from
DEADLINE = "deadline"  # Unix time when the search of a --time budget ends, for every worker (absent: --trials only)
UNITS_MACHINE = "units_machine"  # the machine whose default is DEFAULT_BY_RUNG: the study's units; read with
# units_machine()
TIME_SPENT = "time_spent"  # this run of `tune`: search_s, verification_s, reserved_s (kept back for it), budget_s,
# reserve_searched (that time went to the search: no config had reached full size)
DIAGNOSIS = "diagnosis"  # the rules read over the default's full-size run, what fired since, the focus
# (tuning.search.guide)
SHAPE = "shape"  # the workload's shape as later studies compare it (tuning.loop.earlier.stored_shape)
EARLIER = "earlier_studies"  # the earlier studies alike a new study learned from (tuning.loop.earlier), nearest first
EARLIER_TRIALS = "earlier_trials"  # their trials offered to its sampler (tuning.search.prior.given_at_most); 0: none
MACHINE_PREFIX = "machine:"  # "machine:<name>" -> that machine's facts (tuning.loop.machine), one key per machine
# study: the flat spelling of earlier releases, now fields of EXPERIMENT; read by tuning.document.sections only
OLD_DRIVER = "driver"
OLD_OBJECTIVE = "objective"
OLD_ALLOW_UNSAFE = "allow_unsafe"
OLD_ALLOW_OPERATIONAL = "allow_operational"
OLD_SEED = "seed"
OLD_SETTLED = "settled"
OLD_MEMORY_LIMIT = "memory_limit_bytes"
OLD_MAX_RECOVERY = "max_recovery_s"
OLD_PRODUCTION = "production"  # {data_bytes, memory_bytes, planned_limit_bytes}
OLD_ONLY_RUNG = "only_rung"
OLD_SCALED_RUNGS = "scaled_rungs"  # RUNGS_RUN_SCALED
OLD_SETTINGS = "settings"  # {sampler, trials, time_budget_s, timeout_factor, ..., verify_repeats, warm_up}
OLD_DEFAULT_BY_RUNG = "baseline"  # DEFAULT_BY_RUNG, as releases up to 0.3.0 stored it
OLD_UNITS_MACHINE = "baseline_machine"  # UNITS_MACHINE, as releases up to 0.3.0 stored it

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
CLAIM = "claim"  # {"rung": index, "state": a CLAIM_* below}: whether the trial measures its config at that
# rung or waits for another trial of it (tuning.loop.runs)
CLAIM_PENDING, CLAIM_DEFERRED, CLAIM_MEASURING = "pending", "deferred", "measuring"
RETRY_OF = "retry_of"  # trial number this one re-runs after an interruption
STARTED_FROM = "started_from"  # a config a new study tried first: a known config's label, or "study S trial N"
EARLIER_CONFIG = "earlier study {study} trial {number}"  # the label of a config tried first from an earlier study
IN_PLACE_OF = "in_place_of"  # "earlier study S trial N": the earlier config a start was tried in place of, as this
# study composed the same start for its own workload (tuning.loop.resume.Queue.learn_from)
WORKER = "worker"  # "host:pid" of the process running the trial
TRIAL_MACHINE = "machine"  # the name of the machine the trial ran on (its rung results: "machine", "ratio")
UNSAFE = "unsafe_knobs"  # knob -> safety class of the values this config holds
PLANNED_MEMORY = "planned_memory_bytes"  # the catalog's memory model applied to this config
INFEASIBLE = "infeasible"  # why a complete trial breaks a limit (recovery time); never the result
RECOVERY_OVER_S = "recovery_over_s"  # full-size recovery time minus --max-recovery-time (<= 0: feasible)
FINDINGS = "findings"  # the diagnosis rules that fired on the trial's full-size run
FOCUSED = "focused"  # the knobs a trial searched within narrowed ranges (tuning.search.guide), the rest over their own
WARM_UP = "warm_up"  # the default's first trial on a machine: its full-size run before the ladder, not counted
ROLE_DEFAULT = "default"  # the default's first run
OLD_ROLE_DEFAULT = "baseline"  # how earlier releases stored ROLE_DEFAULT; read by role_of
ROLE_CONTROL = "control"
CONTROLS = "controls"  # study: the default's full-size value at each of its runs (first and controls), in order (drift)


def rung_key(index: int) -> str:
    return f"{RUNG_PREFIX}{index}"


def rungs_run_scaled(user_attrs: dict) -> bool | None:
    """Whether a study's small rungs ran configs scaled (by its user attributes; None: not recorded)."""
    return user_attrs.get(RUNGS_RUN_SCALED, user_attrs.get(OLD_SCALED_RUNGS))


def default_by_rung(user_attrs: dict) -> dict:
    """A study's default runs by rung index (str), whichever release stored them ({}: none yet)."""
    return dict(user_attrs.get(DEFAULT_BY_RUNG, user_attrs.get(OLD_DEFAULT_BY_RUNG)) or {})


def units_machine(user_attrs: dict) -> str | None:
    """The machine whose default gives a study its units, whichever release stored it (None: not yet recorded)."""
    return user_attrs.get(UNITS_MACHINE, user_attrs.get(OLD_UNITS_MACHINE))


def is_ranking(user_attrs: dict) -> bool:
    """Whether a study (by its user attributes) is a knob ranking (`knobtune rank`: every config at one rung), not a
    tuning study with a result."""
    search = (user_attrs.get(EXPERIMENT) or {}).get("search") or {}
    return search.get("only_rung") is not None or user_attrs.get(OLD_ONLY_RUNG) is not None


def role_of(user_attrs: dict) -> str | None:
    """A trial's role (by its user attributes), in this release's spelling whichever release stored it."""
    role = user_attrs.get(ROLE)
    return ROLE_DEFAULT if role == OLD_ROLE_DEFAULT else role


def is_default(user_attrs: dict) -> bool:
    """Whether a trial (by its user attributes) runs the default config: its first run or a control."""
    return role_of(user_attrs) in (ROLE_DEFAULT, ROLE_CONTROL)


def is_fixed(user_attrs: dict) -> bool:
    """Whether a trial's config was fixed before it was asked for (the default, a start, a retry), not sampled."""
    return is_default(user_attrs) or STARTED_FROM in user_attrs or RETRY_OF in user_attrs


def from_earlier(user_attrs: dict) -> bool:
    """Whether a trial (its user attrs) ran a config tried first from an earlier study alike: as it was there, or as
    this study composed the start it was there (``IN_PLACE_OF``)."""
    prefix = EARLIER_CONFIG.split("{", 1)[0]
    return str(user_attrs.get(IN_PLACE_OF) or user_attrs.get(STARTED_FROM) or "").startswith(prefix)
