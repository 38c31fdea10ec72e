"""The experiment as one typed document: what a study is asked to do, in sections.

``knobtune tune --experiment FILE.toml`` reads it, options given beside it override its fields, and
``tune --dry-run`` prints it resolved (every default filled in) as TOML that ``--experiment`` takes back. The
study stores it (``attrs.EXPERIMENT``); ``worker``, ``show``, ``explain``, ``sweep --around`` and a resume read it
back with ``stored_document``, which also reads the flat keys of studies written before the document existed.
The schema is the dataclasses below, read and written by ``knobtune.schema``; docs/experiment.md describes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import UsageError
from knobtune.schema import COMMAND_LINE, Rule, Where, option_fields, read, section, setting, to_dict
from knobtune.tuning.records import attrs
from knobtune.tuning.search import REMOVED_SAMPLERS, SAMPLERS
from knobtune.workloads import Objective

MAX_SEED = 2**32 - 1  # the samplers' (numpy's) seeds
MAX_TIME_S = 30 * 24 * 3600.0  # a budget longer than a month is a typo (100000h), not a plan
MIN_MEMORY_LIMIT_BYTES = 4 << 20  # no database process runs in less
# a month's budget (MAX_TIME_S) holds about this many of the shortest trials a study runs (a rung takes minutes with
# the default's run, the settle and the restore): more is a typo (--trials 1000000), not a plan
MAX_TRIALS = 10_000
# interleaved runs of one config: 100 give an interval as narrow as the noise allows; more only spends the budget
MAX_REPEATS = 100
DEFAULT_TIMEOUT_FACTOR = 3.0  # a run may take this many times the default's time (--timeout-factor)
MIN_TIMEOUT_S = 2.0  # a limit relative to the default's time is never shorter than this
MAX_ROUNDS_FACTOR = 4  # without --max-rounds, verifying may add rounds up to this many times --repeats


class ExperimentError(UsageError):
    """An experiment document (a file, the options, a study's record) is invalid."""


def relative_limit_s(base_s: float, factor: float, least_s: float = MIN_TIMEOUT_S) -> float:
    """The time a run may take: ``factor`` times the reference run's ``base_s``, at least ``least_s``."""
    return max(factor * base_s, least_s)


@dataclass(frozen=True)
class WorkloadSection:
    """What runs: the workload, its size, the driver that runs it, what is measured."""

    name: str = setting(None, option="--workload", example="put-get-delete",  # required
                        help="Workload name (see `knobtune systems`) or a .toml file.")
    records: int | None = setting(least=1, option="--records", example=100000,
                                  note="or leave it out for the workload's own size",
                                  help="Override the workload's full size (records).")
    driver: str | None = setting(option="--driver", example="db_bench",
                                 help="Benchmark driver (default: the system's).")
    objective: str | None = setting(choices=tuple(o.value for o in Objective), what="an objective",
                                    option="--objective",
                                    help="elapsed_s, ops_per_s or p99_us (default: the workload's).")


@dataclass(frozen=True)
class SearchSection:
    """How configs are chosen: the sampler, the knobs searched, the ladder's halving."""

    sampler: str = setting("tpe", choices=SAMPLERS, what="a sampler", option="--sampler",
                           removed=tuple(REMOVED_SAMPLERS), help=f"One of {', '.join(SAMPLERS)}.")
    seed: int = setting(42, least=0, most=MAX_SEED, option="--seed", example=42,
                        note=f"a seed from 0 to {MAX_SEED}",
                        help="Seed of every random choice (the sampler, the run order, the workload's keys, "
                             "a ranking's models; default: {default}).")
    knobs: tuple[str, ...] | None = setting(option="--knobs", example=["write_buffer_size", "max_background_jobs"],
                                            note="or leave it out for all safe knobs",  # None: every safe knob
                                            help="Comma-separated knobs to search (default: all safe ones).")
    allow_unsafe: bool = setting(False, option="--allow-unsafe", sets=True,
                                 help="Also search knobs and values that trade durability or data.")
    allow_operational: bool = setting(False, option="--allow-operational", sets=True,
                                      help="Also search operational values (auto-compaction off): nothing is lost, "
                                           "but the store never settles by itself.")
    ranking: str | None = setting(option="--ranking", example="rank-pgd",
                                  help="A study holding a knob ranking (`knobtune rank`): search only its --top-k "
                                       "knobs.")
    top_k: int | None = setting(least=1, option="--top-k", example=5,
                                help="With --ranking: how many of its top knobs to search.")
    start_from: str | None = setting(option="--start-from", example="pgd",
                                     help="A previous study of the same system: a new study tries its winner and best "
                                          "configs first.")
    reduction_factor: int = setting(3, least=2, option="--reduction-factor", example=3,
                                    note="halving keeps 1/N per rung",
                                    help="Successive halving keeps 1/N of the trials at each rung.")
    # a share of the trials drawn by a second TPE inside the runner-up choice of a knob that decides which others
    # apply, so that a study does not stay in the basin it found first (tuning.search.basins); 0: none; TPE only
    basin_share: float = setting(0.0, least=0.0, most=0.5, example=0.2)
    only_rung: int | None = setting(least=0, example=0)  # a ranking study (`knobtune rank`): every config at this rung


@dataclass(frozen=True)
class BudgetSection:
    """How much to run: the study's sampled trials (the default not counted), this run's wall clock."""

    trials: int | None = setting(least=1, most=MAX_TRIALS, option="--trials", example=50,
                                 help="Total sampled trials of the study (the default not counted).")
    time_s: float | None = setting(positive=True, most=MAX_TIME_S, unit="duration", option="--time", example="20m",
                                   help="Wall-clock budget of this run, e.g. 90s, 20m.")


@dataclass(frozen=True)
class MeasurementSection:
    """How runs are measured and cut: the timeout relative to the default's time, the drift controls."""

    timeout_factor: float = setting(DEFAULT_TIMEOUT_FACTOR, least=1.0, option="--timeout-factor", example=3,
                                    note="a run may take 3x the default's time",
                                    help="Stop a run taking longer than this times the reference run's (the "
                                         "default's; compare: the first config's; sweep --around: the study "
                                         "point's; default: {default}).")
    min_timeout_s: float = setting(MIN_TIMEOUT_S, positive=True, unit="duration", example="2s")
    control_every: int = setting(10, least=0, option="--control-every", example=10, note="0: never",
                                 help="Re-run the default after every N trials that reached full size, to track "
                                      "drift (0: never; default: {default}).")

    def limit_s(self, base_s: float) -> float:
        """The time a run may take, given the default's time for the same run."""
        return relative_limit_s(base_s, self.timeout_factor, self.min_timeout_s)


@dataclass(frozen=True)
class ProofSection:
    """How the result is proven against the default: candidates, interleaved repeats, known configs beside."""

    verify_top: int = setting(3, least=0, most=MAX_TRIALS, option="--verify-top", example=3, note="0: no verification",
                              help="Candidates re-measured against the default at the end (0: none; default: "
                                   "{default}).")
    repeats: int = setting(5, least=2, most=MAX_REPEATS, option="--repeats", example=5,
                           note="an interval needs two runs; verify_top = 0: no verification",
                           help="Interleaved runs per candidate when verifying.")
    # the most interleaved rounds, added while a candidate's interval straddles 1 (None: 4 x repeats)
    max_rounds: int | None = setting(least=2, most=MAX_ROUNDS_FACTOR * MAX_REPEATS, option="--max-rounds", example=20,
                                     note="or leave it out for 4 x repeats",
                                     help="While a candidate's interval straddles 1, add rounds up to this many, in "
                                          f"the time budget (default: {MAX_ROUNDS_FACTOR} x --repeats).")
    known_configs: bool = setting(True, example=True)  # the configs users run instead (PGTune, ...) beside the result

    @property
    def most_rounds(self) -> int:
        """The planned maximum of interleaved rounds (docs/tuning.md, "Verification and statistics")."""
        return self.max_rounds if self.max_rounds is not None else MAX_ROUNDS_FACTOR * self.repeats


@dataclass(frozen=True)
class LimitsSection:
    """What a config may cost: planned or measured memory, recovery time, production's memory-to-data ratio."""

    memory_limit_bytes: int | None = setting(least=MIN_MEMORY_LIMIT_BYTES, unit="size", option="--memory-limit",
                                             example="2GiB", help="Configs planned or measured above this peak "
                                                                  "memory are infeasible, e.g. 2GiB.")
    max_recovery_s: float | None = setting(positive=True, unit="duration", option="--max-recovery-time",
                                           example="30s", help="Full-size runs whose reopen after a crash takes "
                                                               "longer are infeasible, e.g. 30s.")
    production_data_bytes: int | None = setting(positive=True, unit="size", option="--production-data",
                                                example="500GiB",
                                                help="The data size in production, e.g. 500GiB: with "
                                                     "--production-memory, configs are capped at production's "
                                                     "memory-to-data ratio on the benchmark's data.")
    production_memory_bytes: int | None = setting(positive=True, unit="size", option="--production-memory",
                                                  example="64GiB", help="The memory the system gets in production, "
                                                                        "e.g. 64GiB (with --production-data).")


@dataclass(frozen=True)
class PlacementSection:
    """Where the study's trials run: this machine's name among the study's workers."""

    machine: str | None = setting(option="--machine", example="box-1",
                                  help="This machine's name in a study shared by workers (default: the host name).")
    allow_mixed_machines: bool = setting(False, option="--allow-mixed-machines", sets=True,
                                         help="Let a machine of another kind (CPU, memory, disk, OS, version) work on "
                                              "the study.")


@dataclass(frozen=True)
class ResearchSection:
    """Switches that exist to measure knobtune itself (bench arms): each undoes a part of the method."""

    # each false undoes one part: no starts from the system's rules and no narrowed first search (--no-rules); the
    # raw window, without the flush, compaction and reopen a run leaves (--unsettled); small rungs run configs as
    # they are (--unscaled-rungs); the default's first full-size run counted (--no-warm-up)
    rules: bool = setting(True, option="--no-rules", sets=False, example=False,
                          help="No starts from the system's rules and no narrowed first search.")
    settle: bool = setting(True, option="--unsettled", sets=False, example=False,
                           help="Measure the raw window: leave out the flush, compaction and reopen a run leaves "
                                "behind.")
    scale_rungs: bool = setting(True, option="--unscaled-rungs", sets=False, example=False,
                                help="Small rungs run configs as they are, not scaled to their share of the data.")
    warm_up: bool = setting(True, option="--no-warm-up", sets=False, example=False,
                            help="Count the default's first full-size run.")
    try_known_configs: bool = setting(True, example=False)  # false: a new study does not start from known configs
    # false: a config beating the default at a small rung always climbs, however many configs the study already has
    # ahead of the default (the pruner of releases up to 0.4.0; tuning.loop.pruning)
    halving_after_gains: bool = setting(True, example=False)
    # false: a new study does not look for earlier studies alike to learn from (--no-earlier-studies;
    # tuning.loop.earlier)
    earlier_studies: bool = setting(True, option="--no-earlier-studies", sets=False, example=False,
                                    help="A new study does not try the best configs of earlier studies of a "
                                         "workload alike (same system, machine and build) first.")


@dataclass(frozen=True)
class ExperimentDoc:
    """The whole experiment. ``system`` and ``workload.name`` are required; every other field has a default."""

    system: str = setting(None, example="rocksdb")  # required: a system's name or a system file (.toml)
    study: str | None = setting(option="--study", example="pgd",  # None: made from the system and workload
                                help="Study name; running again with it resumes the study.")
    workload: WorkloadSection = section(WorkloadSection)
    search: SearchSection = section(SearchSection)
    budget: BudgetSection = section(BudgetSection)
    measurement: MeasurementSection = section(MeasurementSection)
    proof: ProofSection = section(ProofSection)
    limits: LimitsSection = section(LimitsSection)
    placement: PlacementSection = section(PlacementSection)
    research: ResearchSection = section(ResearchSection)

    def problems(self, where: Where) -> list[str]:
        """What no single field shows: options that go together or exclude each other."""
        s, lim, label = self.search, self.limits, where.label
        found = []
        if self.system is None:
            found.append("no system. Fix: give SYSTEM on the command line, or system = \"rocksdb\" "
                         "in the file")
        if self.workload.name is None:
            found.append("no workload. Fix: add --workload put-get-delete, or name = ... under "
                         "[workload]")
        if (s.ranking is None) != (s.top_k is None):
            found.append("--ranking and --top-k go together (search.ranking, search.top_k). Fix: give both, e.g. "
                         "--ranking rank-pgd --top-k 5")
        if s.ranking is not None and s.knobs is not None:
            found.append("--knobs and --ranking both choose the knobs to search (search.knobs, search.ranking). "
                         "Fix: give one of them")
        proof = self.proof
        if proof.max_rounds is not None and proof.max_rounds < proof.repeats:
            found.append(f"{label('proof.max_rounds')} {proof.max_rounds} is below {label('proof.repeats')} "
                         f"{proof.repeats}: the rounds added while a candidate's interval straddles 1 come after "
                         f"the repeats. Fix: {label('proof.max_rounds')} {MAX_ROUNDS_FACTOR * proof.repeats}, "
                         "or leave it out")
        data, memory = lim.production_data_bytes, lim.production_memory_bytes
        if (data is None) != (memory is None):
            given, missing = ("--production-data", "--production-memory") if memory is None else \
                ("--production-memory", "--production-data")
            found.append(f"{given} needs {missing} (limits.production_data_bytes, limits.production_memory_bytes): "
                         "the ratio is memory to data. Fix: give both, e.g. --production-data 500GiB "
                         "--production-memory 64GiB")
        elif data is not None and memory is not None and memory >= data:
            found.append(f"{label('limits.production_memory_bytes')} holds all of "
                         f"{label('limits.production_data_bytes')}: the ratio would hold no config to anything. "
                         "Fix: leave both out when the data fits in memory")
        return [line if where.source == COMMAND_LINE else f"{where.source}: {line}" for line in found]

    def budget_problem(self) -> str | None:
        """The missing budget, checked after what was named."""
        if self.budget.trials is None and self.budget.time_s is None:
            return "no budget given. Fix: add --trials N or --time 20m (budget.trials or budget.time_s)"
        return None

    def record(self) -> dict[str, Any]:
        """What the study stores (``attrs.EXPERIMENT``)."""
        return to_dict(self)


# each command-line option that sets a field -> its dotted path and rule (--trials -> "budget.trials", ...): the
# commands that take the document read their options through it, and so does bench/peers.py
OPTIONS: dict[str, tuple[str, Rule]] = option_fields(ExperimentDoc)


def read_document(data: Any, where: Where) -> ExperimentDoc:
    """``data`` (a file's tables with the options merged in, or a study's record) as a document.

    Raises:
        ExperimentError: one line per problem, each naming the field (or its option) and the fix.
    """
    document = read(ExperimentDoc, data, where, ExperimentError)
    if problems := document.problems(where):
        raise ExperimentError("\n".join(problems))
    return document


def load_document(path: Path, options: dict[str, Any] | None = None, given: dict[str, str] | None = None) \
        -> ExperimentDoc:
    """The document in the TOML file ``path`` with ``options`` (dotted path -> value, set by ``given``
    options) overriding its fields.

    Raises:
        ExperimentError: the file cannot be read, is not TOML, or holds an invalid document.
    """
    data = read_toml(path, ExperimentError, "experiment") if path.suffix == ".toml" or path.exists() else None
    if data is None:
        raise ExperimentError(f"--experiment {path}: no such file. Fix: give the path of an experiment file "
                              "(docs/experiment.md), e.g. one written by `knobtune tune ... --dry-run`")
    return read_document(merged(data, options or {}), Where(str(path), given or {}))


def merged(data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each dotted path of ``options`` set to its value (the options given override the file)."""
    result = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
    for path, value in options.items():
        *tables, name = path.split(".")
        table = result
        for part in tables:
            table = table.setdefault(part, {}) if isinstance(table.get(part, {}), dict) else {}
        table[name] = value
    return result


def differences(stored: ExperimentDoc, given: ExperimentDoc, paths: tuple[str, ...]) -> list[tuple[str, Any, Any]]:
    """(dotted path, stored value, given value) of each of ``paths`` whose values differ."""
    found = []
    for path in paths:
        a, b = _at(stored, path), _at(given, path)
        if a != b:
            found.append((path, a, b))
    return found


def _at(document: Any, path: str) -> Any:
    for part in path.split("."):
        document = getattr(document, part)
    return document


def stored_document(user_attrs: dict[str, Any], study: str) -> ExperimentDoc:
    """The document a study stored; for a study written before there was one, its flat keys read as one. Its
    values are read as stored, not held to what a person may ask (an experiment built in code may run the default
    alone: ``budget.trials = 0``).

    Raises:
        ExperimentError: the stored document is not valid (a study edited by hand, or a later release's).
    """
    data = user_attrs.get(attrs.EXPERIMENT)
    return read_document(data if data is not None else _old_spelling(user_attrs),
                         Where(f"study '{study}'", ranges=False))


def _old_spelling(user: dict[str, Any]) -> dict[str, Any]:
    """A document from the flat keys earlier releases stored (``system``, ``settings``, ``settled`` ...)."""
    search = user.get(attrs.OLD_SETTINGS) or {}
    workload = user.get(attrs.WORKLOAD) or {}
    production = user.get(attrs.OLD_PRODUCTION) or {}
    ranked = user.get(attrs.RANKED_BY) or {}
    data = {
        "system": user.get(attrs.SYSTEM_FILE) or user.get(attrs.SYSTEM),
        "workload": {"name": workload.get("name"), "records": workload.get("records"),
                     "driver": user.get(attrs.OLD_DRIVER), "objective": user.get(attrs.OLD_OBJECTIVE)},
        "search": {"sampler": search.get("sampler"), "seed": user.get(attrs.OLD_SEED),
                   "allow_unsafe": user.get(attrs.OLD_ALLOW_UNSAFE), "ranking": ranked.get("study"),
                   "top_k": ranked.get("top_k"), "allow_operational": user.get(attrs.OLD_ALLOW_OPERATIONAL),
                   "reduction_factor": search.get("reduction_factor"), "only_rung": user.get(attrs.OLD_ONLY_RUNG)},
        "budget": {"trials": search.get("trials"), "time_s": search.get("time_budget_s")},
        "measurement": {k: search.get(k) for k in ("timeout_factor", "min_timeout_s", "control_every")},
        "proof": {"verify_top": search.get("verify_top"), "repeats": search.get("verify_repeats")},
        "limits": {"memory_limit_bytes": user.get(attrs.OLD_MEMORY_LIMIT),
                   "max_recovery_s": user.get(attrs.OLD_MAX_RECOVERY),
                   "production_data_bytes": production.get("data_bytes"),
                   "production_memory_bytes": production.get("memory_bytes")},
        "research": {"settle": user.get(attrs.OLD_SETTLED), "warm_up": search.get("warm_up"),
                     "scale_rungs": bool(attrs.rungs_run_scaled(user)), "rules": attrs.DIAGNOSIS in user},
    }
    return {name: ({k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value)
            for name, value in data.items() if value is not None}


def replace(document: ExperimentDoc, **paths: Any) -> ExperimentDoc:
    """``document`` with fields changed, each named by its dotted path with ``__`` for the dot
    (``replace(doc, budget__trials=5)``)."""
    changes: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for key, value in paths.items():
        if "__" in key:
            name, field_name = key.split("__", 1)
            changes.setdefault(name, {})[field_name] = value
        else:
            top[key] = value
    sections = {name: dataclasses.replace(getattr(document, name), **fields) for name, fields in changes.items()}
    return dataclasses.replace(document, **top, **sections)
