"""The ``knobtune`` command: thin; parses, builds an experiment, calls the layers below.

One module per command group, each command a function registered here in the order ``--help`` lists them:
``catalog`` (systems, knobs, baseline), ``tuning`` (tune, worker, rank), ``studies`` (show, export, report),
``experiments`` (explain, compare, diagnose, sweep), ``clean``; ``options`` holds the options they share (an option
that sets a field of the experiment takes its help and default from the schema) and their parsing; ``document``
turns the options and ``--experiment`` file of ``tune``, ``rank``, ``compare``, ``sweep`` and ``diagnose`` into one
document, which the library resolves (``knobtune.tuning.document``), and lists ``tune``'s options by section in its
help.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import typer

from knobtune import console
from knobtune.errors import KnobtuneError
from knobtune.interrupts import catch_stops, raised_by_a_stop, stopped_by
from knobtune.cli import capture, catalog, clean, experiments, studies, tuning
from knobtune.cli.document import SectionedCommand

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Find the configuration that makes a database fast for one workload on one machine.")

COMMANDS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("systems", catalog.systems),
    ("knobs", catalog.knobs),
    ("tune", tuning.tune),
    ("worker", tuning.worker),
    ("rank", tuning.rank),
    ("show", studies.show),
    ("export", studies.export),
    ("explain", experiments.explain_command),
    ("compare", experiments.compare),
    ("diagnose", experiments.diagnose_command),
    ("sweep", experiments.sweep_command),
    ("baseline", catalog.baseline),
    ("capture", capture.capture),
    ("report", studies.report),
    ("clean", clean.clean),
)
for _name, _command in COMMANDS:
    app.command(_name, cls=SectionedCommand)(_command)

# What a command stopped by Ctrl-C or SIGTERM has kept, said in its last line; a study's commands keep their
# finished trials and resume, the others measure afresh when run again.
KEPT_WHEN_STOPPED: dict[str, str] = {
    "compare": "the comparison did not finish (its finished runs' raw output is kept); run the same command to "
               "measure again",
    "sweep": "the sweep did not finish and wrote no result (its finished runs' raw output is kept); run the same "
             "command to measure again",
    "explain": "the explanation did not finish and was not stored; run the same command to measure again",
    "diagnose": "the run did not finish; run the same command to run it again",
}
KEPT_BY_A_STUDY = "finished trials are kept; run the same command to resume"


def main() -> None:
    """Entry point: a KnobtuneError becomes one line on stderr and exit status 2; Ctrl-C exits 130, SIGTERM 143."""
    catch_stops()  # SIGTERM ends knobtune as Ctrl-C does: the trial in progress is marked interrupted and queued
    # again, every server and driver is stopped, the scratch data removed
    sys.exit(run(sys.argv[1:]))


def run(args: list[str]) -> int:
    """One command line, in this process: its exit status (0, 2 for an error a user caused, 130/143 when stopped).

    The tests call it as users call ``knobtune``: the same one-line errors on stderr, the same statuses.
    """
    try:  # click's own main, so that its usage errors reach us as exceptions (typer's would print three lines)
        code = typer.main.get_command(app).main(args=args, prog_name="knobtune", standalone_mode=False)
    except KnobtuneError as exc:
        for line in str(exc).splitlines():  # one line per problem (an experiment document can hold several)
            console.err.print(f"error: {line}", markup=False)
        return 2
    except typer.Abort:
        code = 130
    except typer.TyperException as exc:  # click's usage errors (unknown option, a value of the wrong type)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `knobtune` or `knobtune tune` alone: the help
            console.err.print(ctx.get_help() if ctx else str(exc), markup=False)
        else:  # one line, as every other error
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            console.err.print(f"error: {message.rstrip('.')}. Fix: see `{ctx.command_path if ctx else 'knobtune'} "
                              "--help`", markup=False)
        return int(getattr(exc, "exit_code", 2))
    except Exception as exc:  # noqa: BLE001  a failure while the stop was being handled is the stop
        if not raised_by_a_stop(exc):  # the trial it cut is marked interrupted or, if that failed too, run again
            raise
        code = 130
    if code == 130:
        kept = KEPT_WHEN_STOPPED.get(_command_name(args), KEPT_BY_A_STUDY)
        by_sigterm = stopped_by() == signal.SIGTERM
        console.err.print(f"{'stopped (SIGTERM)' if by_sigterm else 'interrupted'}: {kept}", markup=False)
        return 143 if by_sigterm else 130
    return code if isinstance(code, int) else 0


def _command_name(args: list[str]) -> str:
    """The command of a command line (the first word that is not an option: knobtune has no global options)."""
    return next((arg for arg in args if not arg.startswith("-")), "")
