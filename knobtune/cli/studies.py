"""Commands that read a stored study: ``show``, ``export``, ``report``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import optuna
import typer

from knobtune import console
from knobtune.errors import UsageError
from knobtune.knobs import load_catalog
from knobtune.outputs import OutputFile, Written, check_outputs
from knobtune.report import export_beside, export_config, export_files, page_files, summarize, write_report
from knobtune.storage import open_store
from knobtune.tuning.proof import EXPLANATION
from knobtune.tuning.document import tuning_study
from knobtune.cli.options import (
    DirOption, ForceOption, JsonOption, StorageOption, output_path, trial_config, write_output,
)


def show(study: str, storage: StorageOption = None, directory: DirOption = None,
         json_output: JsonOption = False) -> None:
    """Progress and result of a study: counts, best against the default, the verdict.

    Example: knobtune show rocksdb-put-get-delete --json
    """
    store = open_store(directory, storage)
    loaded = store.load(study)
    summary = summarize(loaded)
    if json_output:
        console.print_json(summary.to_dict())
    else:
        console.summary_text(summary, load_catalog(summary.system))


def export(
    study: str,
    format: Annotated[str, typer.Option("--format", help="The system's own format or a driver's (`show` lists a "
                                                         "study's formats); json always.")] = "json",
    output: Annotated[Optional[Path],
                      typer.Option("-o", "--output", help="Write to this file instead of stdout.")] = None,
    trial: Annotated[Optional[int], typer.Option(help="Export this trial's config instead of the result.")] = None,
    minimal: Annotated[bool, typer.Option(
        "--minimal", help="Export the smallest set of the result's changes that keeps 95% of its gain "
                          "(`knobtune explain` first).")] = False,
    storage: StorageOption = None,
    directory: DirOption = None,
    force: ForceOption = False,
) -> None:
    """A study's result in the system's own format. What the format cannot hold (RocksDB's row cache, say) is
    written beside the file (-o) as the code or the other format that sets it, and said.

    Example: knobtune export rocksdb-put-get-delete --format rocksdb-options -o OPTIONS.ini
    """
    if minimal and trial is not None:
        raise UsageError("--minimal and --trial both choose the config. Fix: give one of them")
    output = output_path(output)
    store = open_store(directory, storage)
    loaded = tuning_study(store.load(study), "export")
    summary = summarize(loaded)
    catalog = load_catalog(summary.system)
    config = None
    if minimal:
        config = _minimal_config(loaded, study)
    elif trial is not None:
        config = trial_config(loaded, study, trial)
    beside = export_beside(summary, catalog, format, config)
    if beside and not output:
        raise UsageError(f"{'; '.join(b.note.replace('FILE', 'the file') for b in beside)}. Fix: add -o FILE: "
                         "what sets it is written beside that file")
    if output:
        check_outputs(export_files(summary, catalog, format, output, config), force=force)
    text = export_config(summary, catalog, format, config)
    if output:
        write_output(output, text)
        for part in beside:
            companion = output.with_name(output.name + part.suffix)
            write_output(companion, part.text)
            console.err.print(f"wrote {companion}: {part.note.replace('FILE', str(output))}", markup=False)
    else:
        sys.stdout.write(text)
    if config is None and summary.result_trial is None:  # said once the export is done: an error stays one line
        console.err.print(f"note: {summary.verdict}; exported the default config", markup=False)
    if output:
        console.err.print(f"wrote {output}", markup=False)


def report(
    study: str,
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="The file to write: .html (its JSON goes beside it, same name, .json) or .json (the "
                               "data alone).")] = Path("report.html"),
    storage: StorageOption = None,
    directory: DirOption = None,
    force: ForceOption = False,
) -> None:
    """One self-contained HTML report of a study (opens offline), and the same data as JSON.

    Example: knobtune report rocksdb-put-get-delete -o report.html
    """
    output_path(output)
    html_path, json_path = page_files(output)
    check_outputs([OutputFile(html_path, Written.HTML)] if html_path else [], force=force)
    check_outputs([OutputFile(json_path, Written.JSON)], force=force)
    store = open_store(directory, storage)
    reach = (f" --dir {shlex.quote(str(store.home))}" if directory else "") + \
        (f" --storage {shlex.quote(storage)}" if storage else "")
    write_report(store.load(study), output, reach)
    console.err.print(f"wrote {html_path} and {json_path}" if html_path else f"wrote {json_path}", markup=False)


def _minimal_config(loaded: optuna.Study, study: str) -> dict[str, Any]:
    """The minimal config ``knobtune explain`` stored (its note goes to stderr).

    Raises:
        UsageError: the study has not been explained, or the explanation found no minimal config.
    """
    explained = loaded.user_attrs.get(EXPLANATION) or {}
    if explained.get("minimal") is None:
        raise UsageError(f"study '{study}' has no minimal config"
                         + (f" ({explained['minimal_note']})" if explained.get("minimal_note") else "")
                         + f". Fix: run `knobtune explain {study}` first")
    console.err.print(f"minimal config: {explained['minimal_note']}", markup=False)
    return dict(explained["minimal"])
