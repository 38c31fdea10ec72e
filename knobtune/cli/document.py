"""The document's front door: options and an experiment file into one document (the library resolves it,
``knobtune.tuning.document.resolve``); help that shows options in their document's sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.core

from knobtune.schema import COMMAND_LINE, Where
from knobtune.tuning.document import OPTIONS, ExperimentDoc, ExperimentError, load_document, merged, read_document
from knobtune.cli.options import knob_list
from knobtune.errors import UsageError


def experiment_document(ctx: Any, file: Path | None, system: str | None, fixed: dict[str, Any] | None = None,
                        own: tuple[str, ...] = ()) -> ExperimentDoc:
    """The document of ``file`` (or none) with ``system`` and the options given on the command line (``ctx``: the
    command's click context) over its fields, and the fields a command sets itself (``fixed``: dotted path ->
    value; ``rank``'s). ``own``: the command's options spelled as a field's that are its own, not the field
    (``compare --repeats``: runs per config, not the proof's).

    Raises:
        ExperimentError: one line per problem, naming the field (or its option) and the fix.
    """
    given = given_options(ctx, own)
    if "--knobs" in given:
        given["--knobs"] = knob_list(given["--knobs"])
    options = (fixed or {}) | {OPTIONS[option][0]: value for option, value in given.items()}
    if system is not None:
        options["system"] = system
    labels = {OPTIONS[option][0]: option for option in given} | ({"system": "SYSTEM"} if system else {})
    if file is not None:
        return load_document(file, options, labels)
    return read_document(merged({}, options), Where(COMMAND_LINE, labels))


def given_options(ctx: Any, own: tuple[str, ...] = ()) -> dict[str, Any]:
    """The options on the command line that set a field of the document (option -> value; a flag -> the value it
    sets), those left at their defaults and the command's ``own`` left out."""
    given = {}
    for param in ctx.command.params:
        option = param.opts[0] if param.opts else ""
        source = ctx.get_parameter_source(param.name)
        if option in OPTIONS and option not in own and source is not None \
                and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            value, rule = ctx.params[param.name], OPTIONS[option][1]
            if rule.sets is None or value:
                given[option] = value if rule.sets is None else rule.sets
    return given


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


__all__ = ["ExperimentError", "SectionedCommand", "everyday_options", "experiment_document"]
