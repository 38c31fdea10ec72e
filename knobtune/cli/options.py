"""Options shared by the commands (one spelling and help text each) and the parsing of their values."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Annotated, Any, Optional

import optuna
import typer

from knobtune import console
from knobtune.errors import UsageError
from knobtune.knobs import Catalog
from knobtune.units import human_bytes
from knobtune.storage import StudyStore
from knobtune.schema import number_text
from knobtune.tuning.document import OPTIONS, ExperimentDoc
from knobtune.systems import make_target, reclaim_server_homes, use_system
from knobtune.outputs import check_writable_parent
from knobtune.tuning.records import record_of
from knobtune.workloads import Workload


def option_help(option: str) -> str:
    """The help of a document field's option (``--records``), written once in the schema (its rule's ``help``),
    with the field's default said where the text marks it (``{default}``) or at its end."""
    path, rule = OPTIONS[option]
    default = functools.reduce(getattr, path.split("."), ExperimentDoc())
    if default is None or isinstance(default, bool):
        return rule.help
    said = number_text(default) if isinstance(default, (int, float)) else str(default)
    return rule.help.format(default=said) if "{default}" in rule.help else \
        f"{rule.help.removesuffix('.')} (default: {said})."


def field_option(option: str, panel: str | None = None, *, hidden: bool = False) -> Any:
    """The option that sets a field of the document (``--records``), the same in every command that takes it: its
    help from the schema (``option_help``); its default is the document's, so the parameter's own stays None (a
    flag's False) and ``document.experiment_document`` sees only what was given. ``panel``: its section in the
    command's help (``tune``'s)."""
    return typer.Option(option, help=option_help(option), rich_help_panel=panel, hidden=hidden)


DirOption = Annotated[Optional[Path],
                      typer.Option("--dir", help="Studies folder (default ./knobtune-studies or $KNOBTUNE_HOME).")]
StorageOption = Annotated[Optional[str],
                          typer.Option("--storage", help="Optuna storage URL (default: SQLite in --dir).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Overwrite an existing -o file that knobtune did not "
                                                           "write (never a studies database or a capture).")]
ExperimentOption = Annotated[Optional[Path], typer.Option(
    "--experiment", help="The whole experiment as a TOML file (docs/experiment.md; `tune --dry-run` writes one); the "
                         "options given beside it override its fields.")]
# the options that set a field of the document, for the commands that take them (tune gives its own sections)
WorkloadOption = Annotated[Optional[str], field_option("--workload")]
RecordsOption = Annotated[Optional[int], field_option("--records")]
DriverOption = Annotated[Optional[str], field_option("--driver")]
ObjectiveOption = Annotated[Optional[str], field_option("--objective")]
StudyOption = Annotated[Optional[str], field_option("--study")]
TimeOption = Annotated[Optional[str], field_option("--time")]
KnobsOption = Annotated[Optional[str], field_option("--knobs")]
SeedOption = Annotated[Optional[int], field_option("--seed")]
AllowUnsafeOption = Annotated[bool, field_option("--allow-unsafe")]
AllowOperationalOption = Annotated[bool, field_option("--allow-operational")]
TimeoutFactorOption = Annotated[Optional[float], field_option("--timeout-factor")]
MemoryLimitOption = Annotated[Optional[str], field_option("--memory-limit")]
UnsettledOption = Annotated[bool, field_option("--unsettled")]
MachineOption = Annotated[Optional[str], field_option("--machine")]
MixedOption = Annotated[bool, field_option("--allow-mixed-machines")]


SYSTEM_HELP = "A system's name (see `knobtune systems`) or a system file (.toml, docs/system-file.md)."
SystemArgument = Annotated[str, typer.Argument(help=SYSTEM_HELP, callback=use_system)]
# the system of a command that takes the document: given, or left to its --experiment file
DocumentSystemArgument = Annotated[Optional[str], typer.Argument(
    help=f"{SYSTEM_HELP.removesuffix('.')}; may be left to --experiment.", show_default=False)]


def at_least(option: str, value: float | None, least: float, fix: str) -> None:
    """Raises UsageError when ``option``'s ``value`` is given and below ``least`` or not a finite number (inf,
    nan); ``fix`` says what to write."""
    if value is not None and not math.isfinite(value):
        raise UsageError(f"{option} {value} is not a finite number. Fix: {fix}")
    if value is not None and value < least:
        raise UsageError(f"{option} {_number(value)} is below {_number(least)}. Fix: {fix}")


def at_most(option: str, value: float | None, most: float, fix: str) -> None:
    """Raises UsageError when ``option``'s ``value`` is given and above ``most``; ``fix`` says what to write."""
    if value is not None and value > most:
        raise UsageError(f"{option} {_number(value)} is above {_number(most)}. Fix: {fix}")


def _number(value: float) -> str:
    """A whole number as written (4294967295), any other as short as it reads (0.5, inf)."""
    return str(int(value)) if isinstance(value, int) or (math.isfinite(value) and value == int(value)) \
        else f"{value:g}"


def knob_list(knobs: str | None) -> list[str] | None:
    """--knobs as a list of names (None: not given).

    Raises:
        UsageError: the list names no knob, or one twice.
    """
    if knobs is None:
        return None
    names = [k.strip() for k in knobs.split(",")]
    if not any(names) or not all(names):
        raise UsageError(f"--knobs {knobs!r} holds an empty name. Fix: name knobs separated by commas, e.g. "
                         "--knobs write_buffer_size,max_background_jobs, or leave --knobs out for all safe knobs")
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise UsageError(f"--knobs names {', '.join(twice)} twice. Fix: name each knob once")
    return names


def output_path(path: Path | None, option: str = "-o") -> Path | None:
    """An output path (``-o``), checked before anything runs: not a folder, and a writable folder on its way (its
    missing parent folders are made when it is written, ``write_output``). What it may not overwrite is checked by
    ``knobtune.outputs.check_outputs`` once the command knows the format it writes.

    Raises:
        UsageError: it is a folder, or its nearest existing parent is not a writable folder.
    """
    if path is None:
        return None
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder. Fix: give a file's path, e.g. {option} {path / 'out'}")
    check_writable_parent(path, option)
    return path


def write_output(path: Path, text: str, option: str = "-o") -> None:
    """Write ``text`` to ``path``, making its missing parent folders.

    Raises:
        UsageError: it cannot be written (one line with the cause).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror}). Fix: choose a writable {option} path") from None


def preflight(catalog: Catalog, workload: Workload, driver: str | None, store: StudyStore, *, settle: bool = True,
              memory_limit_bytes: int | None = None) -> None:
    """What the target would refuse when it opens (a tool missing, no room for the data), checked before a command
    announces anything, starts a process or writes a file.

    Raises:
        KnobtuneError: one line naming what is missing and the fix.
    """
    make_target(catalog, workload, store.worker_scratch(), driver, settle=settle,
                memory_limit_bytes=memory_limit_bytes).preflight()


def trial_config(loaded: optuna.Study, study: str, trial: int) -> dict[str, Any]:
    """The changed knobs of trial number ``trial`` of ``study`` (--trial N).

    Raises:
        UsageError: the study has no such trial.
    """
    if not 0 <= trial < len(loaded.trials):
        raise UsageError(f"study '{study}' has no trial {trial}. Fix: see `knobtune show {study}`")
    return dict(record_of(loaded.trials[trial]).config)


def reclaim(store: StudyStore, json_output: bool = False) -> None:
    """Before a command runs anything, once every input is checked: make the studies folder; remove what killed
    knobtune processes on this host left (their scratch folders, their servers' data in /tmp), and say how much
    that freed."""
    store.create()
    freed = store.remove_stale_scratch() + reclaim_server_homes()
    if freed:
        (console.err if json_output else console.out).print(
            f"reclaimed {human_bytes(freed)} left by knobtune processes that were killed", markup=False)
