"""``tune``'s front door: options and an experiment file into one document, resolved on this machine; the plan
``--dry-run`` prints; help that shows options in their document's sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.core

from knobtune.knobs import load_catalog
from knobtune.schema import COMMAND_LINE, Where, option_fields, to_toml
from knobtune.storage import StudyStore
from knobtune.systems import make_target
from knobtune.tuning import Experiment, build_space
from knobtune.tuning import document
from knobtune.tuning.document import (
    ExperimentDoc, ExperimentError, load_document, merged, narrowed, of_system, read_document, tuning_study)
from knobtune.tuning.records import starting_configs
from knobtune.tuning.search import kept_out_label, ranked_knobs
from knobtune.cli.options import knob_list, system_argument, workload_for
from knobtune.names import NAME_CHARS, name_problem, study_name
from knobtune.errors import UsageError

OPTIONS = option_fields(ExperimentDoc)  # --trials -> ("budget.trials", its rule), ...


def experiment_document(ctx: Any, file: Path | None, system: str | None,
                        fixed: dict[str, Any] | None = None) -> ExperimentDoc:
    """The document of ``file`` (or none) with ``system`` and the options given on the command line (``ctx``: the
    command's click context) over its fields, and the fields a command sets itself (``fixed``: dotted path ->
    value; ``rank``'s).

    Raises:
        ExperimentError: one line per problem, naming the field (or its option) and the fix.
    """
    given = given_options(ctx)
    if "--knobs" in given:
        given["--knobs"] = knob_list(given["--knobs"])
    options = (fixed or {}) | {OPTIONS[option][0]: value for option, value in given.items()}
    if system is not None:
        options["system"] = system
    labels = {OPTIONS[option][0]: option for option in given} | ({"system": "SYSTEM"} if system else {})
    if file is not None:
        return load_document(file, options, labels)
    return read_document(merged({}, options), Where(COMMAND_LINE, labels))


def given_options(ctx: Any) -> dict[str, Any]:
    """The options on the command line that set a field of the document (option -> value; a flag -> the value it
    sets), those left at their defaults left out."""
    given = {}
    for param in ctx.command.params:
        option = param.opts[0] if param.opts else ""
        source = ctx.get_parameter_source(param.name)
        if option in OPTIONS and source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            value, rule = ctx.params[param.name], OPTIONS[option][1]
            if rule.sets is None or value:
                given[option] = value if rule.sets is None else rule.sets
    return given


def resolve(doc: ExperimentDoc, store: StudyStore, prefix: str = "") -> Experiment:
    """``doc`` on this machine: its system, workload at its size, driver, knobs and limits checked and filled in.

    Raises:
        KnobtuneError: one line naming what is wrong (an unknown system, workload, knob, study) and the fix.
    """
    catalog = load_catalog(system_argument(doc.system))
    spec, driver = workload_for(catalog, doc.workload.name, doc.workload.records, doc.workload.driver)
    if spec.capture is not None and doc.workload.objective not in (None, spec.objective.value):
        raise UsageError(f"--objective {doc.workload.objective}: a capture's objective goes with its pace "
                         f"({spec.source} says objective = '{spec.objective.value}'). Fix: drop --objective, or set "
                         "pace and objective together in capture.toml (docs/replay.md)")
    name = study_name(doc.study) if doc.study is not None else _default_name(f"{prefix}{catalog.system}-{spec.name}")
    s = doc.search
    searched, ranked_by = list(s.knobs) if s.knobs is not None else None, None
    if s.ranking is not None and s.top_k is not None:
        searched = ranked_knobs(of_system(store.load(s.ranking), catalog.system, "--ranking"), s.top_k)
        ranked_by = {"study": s.ranking, "top_k": s.top_k, "knobs": searched}
    space = build_space(catalog, searched, s.allow_unsafe, driver, allow_operational=s.allow_operational)
    limit = doc.limits.memory_limit_bytes
    if limit is not None and (over := catalog.memory.over_limit(catalog.defaults(), limit)):
        raise UsageError(f"--memory-limit is too low for the default config: {over}. Fix: raise --memory-limit "
                         "(limits.memory_limit_bytes)")
    starts = starting_configs(tuning_study(of_system(store.load(s.start_from), catalog.system, "--start-from"),
                                          "--start-from"), catalog.system) if s.start_from else ()
    resolved = document.replace(doc, study=name, workload__records=spec.records, workload__driver=driver,
                                workload__objective=(doc.workload.objective or spec.objective.value))
    return Experiment(doc=resolved, catalog=catalog, workload=spec, space=space, ranked_by=ranked_by,
                      start_configs=starts)


def _default_name(name: str) -> str:
    """The study name made from a system and a workload, when none is given.

    Raises:
        UsageError: the system's or the workload's name makes no valid study name.
    """
    if (problem := name_problem(name)) is not None:
        raise UsageError(f"the study name made from the system and the workload, {name!r}, {problem}. Fix: name the "
                         f"study with --study ({NAME_CHARS})")
    return name


def plan_text(experiment: Experiment, store: StudyStore) -> str:
    """``tune --dry-run``: the resolved document as TOML (``--experiment`` takes it back), then, as comments, the
    search after this machine and the limits have narrowed it: what will run."""
    notes: list[str] = []
    e = experiment
    target = make_target(e.catalog, e.workload, store.worker_scratch(), e.driver, settle=e.research.settle,
                         memory_limit_bytes=e.limits.memory_limit_bytes)
    e = narrowed(e, target, notes.append)  # nothing is opened: the target only says what this machine refuses
    space = e.space
    lines = [f"study {e.study_name} in {store.shown_url}; {len(space.knobs)} knobs searched: " + ", ".join(space.knobs),
             "ladder: " + "; ".join(str(r) for r in e.rungs),
             "kept out (unsafe): " + (", ".join(f"{kept_out_label(k, e.catalog)} ({v})"
                                                for k, v in space.left_out.items()) or "none"),
             *([note] if (note := space.driver_note()) else []), *notes]
    return to_toml(e.doc) + "\n" + "\n".join(f"# {line}" for line in lines) + "\n"


class SectionedCommand(typer.core.TyperCommand):
    """A command whose help lists its options in sections (each option's ``rich_help_panel``), everyday ones first,
    in plain text (knobtune's help is not drawn with rich); and that refuses an option with one value given twice
    (``--time 5m --time 10m``: click would keep the last and drop the other without a word)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing and args:
            _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            for param in dict.fromkeys(order):
                count = sum(1 for seen in order if seen is param)
                if count > 1 and param.param_type_name == "option" and not param.multiple \
                        and not getattr(param, "is_flag", False):
                    spelled = " or ".join(param.opts)
                    raise UsageError(f"{spelled} is given {count} times, and it takes one value: the others would be "
                                     f"dropped without a word. Fix: give {param.opts[0]} once")
        return super().parse_args(ctx, args)

    def format_options(self, ctx: Any, formatter: Any) -> None:  # typer's click (vendored since 0.25) or click's
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            if (record := param.get_help_record(ctx)) is not None:
                name = "Arguments" if param.param_type_name == "argument" else \
                    getattr(param, "rich_help_panel", None) or "Options"
                sections.setdefault(name, []).append(record)
        for name, records in sections.items():
            with formatter.section(name):
                formatter.write_dl(records)


def everyday_options(command: typer.core.TyperCommand) -> list[str]:
    """The options ``--help`` lists outside a named section (``--help`` itself among them)."""
    return [param.opts[0] for param in [*command.params, command.get_help_option(_context(command))]
            if param is not None and param.param_type_name == "option" and not getattr(param, "hidden", False)
            and not getattr(param, "rich_help_panel", None)]


def _context(command: typer.core.TyperCommand) -> Any:
    return command.make_context("knobtune", ["--help"], resilient_parsing=True)


__all__ = ["OPTIONS", "ExperimentError", "SectionedCommand", "everyday_options", "experiment_document", "plan_text",
           "resolve"]
