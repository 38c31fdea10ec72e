"""A study's result in the formats people deploy: the system's own file, driver flags, JSON (read back by
``report.config_file``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from knobtune.knobs import Catalog
from knobtune.outputs import OutputFile, Written, json_mark, text_mark
from knobtune.report.summary import StudySummary
from knobtune.report.summary_text import describe_costs
from knobtune.targets import Beside
from knobtune.systems import export_format


def export_config(summary: StudySummary, catalog: Catalog, format_name: str,
                  config: dict[str, Any] | None = None) -> str:
    """``config`` (the study's result when None) in the export format named ``format_name``, with its safety notes.

    Raises:
        UsageError: the study's system and driver have no such format.
        ConfigError: the system refuses the config (a format the system itself writes).
    """
    changed = summary.result_config if config is None else config
    if format_name == "json":
        return json.dumps(json_mark() | {
            "system": summary.system, "study": summary.study, "workload": summary.heading.workload,
            "config": changed, "verified": summary.verified, "verdict": summary.verdict,
            "allow_unsafe": summary.safety.allow_unsafe, "allow_operational": summary.safety.allow_operational,
            "unsafe_knobs": summary.safety.unsafe_in_result,
            "left_out_unsafe": summary.safety.left_out, "warnings": summary.safety.warnings,
            "settled": summary.cost.settled, "costs": summary.cost.costs,
        }, indent=2, default=str) + "\n"
    spec = export_format(summary.system, summary.heading.experiment.get("driver"), format_name)
    text = spec.render(catalog, catalog.config(changed))
    comment = spec.comment
    if comment is None:
        return text
    header = [text_mark(comment), f"{comment} study {summary.study}: {summary.verdict}"]
    header += [f"{comment} NOT IN THIS FILE: {b.note}" for b in spec.beside(catalog, catalog.config(changed))]
    header += [f"{comment} {role}: {describe_costs(cost)} ({cost.get('source')})"
               for role, cost in summary.cost.costs.items()]
    header += [f"{comment} WARNING: {w}" for w in summary.safety.warnings]
    if summary.safety.left_out and not summary.safety.allow_unsafe:
        header.append(f"{comment} kept out of the search (unsafe): "
                      + ", ".join(f"{k} ({v})" for k, v in summary.safety.kept_out.items()))
    return "\n".join(header) + "\n" + text


def export_beside(summary: StudySummary, catalog: Catalog, format_name: str,
                  config: dict[str, Any] | None = None) -> tuple[Beside, ...]:
    """What the export of ``config`` (the study's result when None) in ``format_name`` cannot hold: the files to
    write beside it, each with its one-line note (none for json, which holds every knob).

    Raises:
        UsageError: the study's system and driver have no such format.
    """
    if format_name == "json":
        return ()
    changed = summary.result_config if config is None else config
    spec = export_format(summary.system, summary.heading.experiment.get("driver"), format_name)
    return tuple(dataclasses.replace(b, text=f"{text_mark(b.comment)}\n{b.text}")
                 for b in spec.beside(catalog, catalog.config(changed)))


def export_files(summary: StudySummary, catalog: Catalog, format_name: str, path: Path,
                 config: dict[str, Any] | None = None) -> list[OutputFile]:
    """The files ``export -o path`` writes: the export itself and what is written beside it, each with its format
    (``knobtune.outputs`` tells from it whether an existing file there is one knobtune wrote).

    Raises:
        UsageError: the study's system and driver have no such format.
    """
    if format_name == "json":
        return [OutputFile(path, Written.JSON)]
    spec = export_format(summary.system, summary.heading.experiment.get("driver"), format_name)
    return [OutputFile(path, Written.TEXT, spec.comment)] + [
        OutputFile(path.with_name(path.name + b.suffix), Written.TEXT, b.comment)
        for b in export_beside(summary, catalog, format_name, config)]
