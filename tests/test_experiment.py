"""The experiment as one typed document: ``tune --experiment FILE`` with options over its fields, ``--dry-run``
printing it as it will run (TOML the file option takes back), the study storing it, a resume checked against it
field by field, and ``tune --help`` with the everyday options first."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from knobtune.cli import app, run
from knobtune.cli.document import everyday_options
from knobtune.cli.options import option_help
from knobtune.errors import StudyNotFoundError, UsageError
from knobtune.knobs import Catalog
from knobtune.storage import open_store
from knobtune.tuning import Experiment, attrs
from knobtune.tuning.document import OPTIONS

from conftest import tiny

TUNE = ("tune", "rocksdb", "--workload", "put-get-delete", "--records", "2000")
RESEARCH = {"--no-rules", "--unsettled", "--unscaled-rungs", "--no-warm-up"}


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    status = run(list(args))
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def _tune() -> typer.core.TyperCommand:
    return typer.main.get_command(app).commands["tune"]


def test_help_shows_at_most_twelve_options_outside_its_sections() -> None:
    tune = _tune()
    everyday = everyday_options(tune)
    assert len(everyday) <= 12, everyday
    assert {"--workload", "--trials", "--time", "--experiment", "--dry-run"} <= set(everyday)
    assert {param.opts[0] for param in tune.params if getattr(param, "hidden", False)} == RESEARCH
    shown = CliRunner().invoke(app, ["tune", "--help"]).stdout
    for section in ("Workload:", "Search:", "Measurement:", "Proof:", "Limits:", "Workers:"):
        assert f"\n{section}\n" in shown
    assert not any(option in shown for option in RESEARCH), "research switches live in the document"


def test_rank_has_no_research_switch() -> None:
    rank = typer.main.get_command(app).commands["rank"]
    assert RESEARCH.isdisjoint(option for param in rank.params for option in param.opts)
    assert not any(option in CliRunner().invoke(app, ["rank", "--help"]).stdout for option in RESEARCH)


def test_every_option_the_schema_names_is_an_option_of_tune() -> None:
    options = {name for param in _tune().params for name in param.opts}
    assert set(OPTIONS) <= options, set(OPTIONS) - options
    assert OPTIONS["--repeats"][0] == "proof.repeats" and OPTIONS["--time"][0] == "budget.time_s"
    assert OPTIONS["--no-rules"][0] == "research.rules" and OPTIONS["--no-rules"][1].sets is False


# options spelled as a field's that are a command's own, with another meaning: compare's and sweep's runs per config
# or point, explain's per step, the study a worker joins, the workload a capture runs
OWN = {("compare", "--repeats"), ("sweep", "--repeats"), ("explain", "--repeats"), ("worker", "--study"),
       ("capture", "--workload"), ("capture", "--records")}


def test_an_option_that_sets_a_field_says_the_same_in_every_command() -> None:
    """One flag, one meaning, one help text: the schema's, with the field's default from the schema."""
    commands = typer.main.get_command(app).commands
    seen = {(name, option): param.help for name, command in commands.items() for param in command.params
            for option in param.opts if option in OPTIONS}
    assert {key for key in seen if seen[key] != option_help(key[1])} == OWN
    assert option_help("--timeout-factor").endswith("default: 3).") and option_help("--seed").endswith("default: 42).")
    for name in ("tune", "compare", "sweep", "diagnose"):  # the commands that take fields take the document
        assert "--experiment" in {option for param in commands[name].params for option in param.opts}


def test_compare_sweep_and_diagnose_take_the_document_with_options_over_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "small.toml"
    path.write_text('system = "rocksdb"\n[workload]\nname = "fillrandom"\nrecords = 10\n')
    for command in (("compare", "--config", "default", "--config", "default"), ("sweep", "--knob", "write_buffer_size"),
                    ("diagnose",)):
        capsys.readouterr()
        assert run([*command, "--experiment", str(path), "--dir", str(tmp_path / "s")]) == 2
        assert "--records 10 is below 500" in capsys.readouterr().err  # the file's size reached the command
        assert run([*command, "--experiment", str(path), "--records", "3000", "--seed", "-1"]) == 2
        assert "--seed -1 is below 0" in capsys.readouterr().err  # the options beside it override the file
    assert not (tmp_path / "s").exists()


def test_dry_run_prints_the_document_that_runs_and_the_file_option_takes_it_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / "studies")
    first = _out(capsys, *TUNE, "--trials", "3", "--time", "5m", "--knobs", "write_buffer_size,max_background_jobs",
                 "--dry-run", "--dir", home)
    document = tomllib.loads(first)
    assert document["system"] == "rocksdb" and document["study"] == "rocksdb-put-get-delete"
    assert document["workload"]["records"] == 2000 and document["workload"]["driver"]
    assert document["workload"]["objective"] == "elapsed_s" and document["budget"] == {"trials": 3, "time_s": 300.0}
    assert document["search"]["knobs"] == ["write_buffer_size", "max_background_jobs"]
    assert "# ladder: " in first and "# study rocksdb-put-get-delete in " in first
    path = tmp_path / "experiment.toml"
    path.write_text(first)
    assert _out(capsys, "tune", "--experiment", str(path), "--dry-run", "--dir", home) == first
    over = tomllib.loads(_out(capsys, "tune", "--experiment", str(path), "--trials", "7", "--no-rules", "--dry-run",
                              "--dir", home))
    assert over["budget"]["trials"] == 7 and over["research"]["rules"] is False  # the options given win
    assert {k: v for k, v in over.items() if k not in ("budget", "research")} == \
        {k: v for k, v in document.items() if k not in ("budget", "research")}
    with pytest.raises(StudyNotFoundError):  # a dry run starts no study
        open_store(tmp_path / "studies").load("rocksdb-put-get-delete")


@pytest.mark.slow
def test_a_study_from_a_file_and_the_same_from_options_store_equal_documents(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _out(capsys, *TUNE, "--trials", "1", "--verify-top", "0", "--study", "same", "--dir", str(tmp_path / "flags"),
         "--json")
    path = tmp_path / "same.toml"
    path.write_text('system = "rocksdb"\nstudy = "same"\n[workload]\nname = "put-get-delete"\nrecords = 2000\n'
                    "[budget]\ntrials = 1\n[proof]\nverify_top = 0\n")
    _out(capsys, "tune", "--experiment", str(path), "--dir", str(tmp_path / "file"), "--json")
    flags, file = (open_store(tmp_path / where).load("same").user_attrs for where in ("flags", "file"))
    assert flags[attrs.EXPERIMENT] == file[attrs.EXPERIMENT]
    assert flags[attrs.EXPERIMENT]["budget"] == {"trials": 1} and flags[attrs.EXPERIMENT]["proof"]["verify_top"] == 0
    shown = _out(capsys, "show", "same", "--dir", str(tmp_path / "file"), "--json")
    assert '"document"' in shown  # show reads the document back


def test_a_resume_names_each_field_that_differs_with_its_fix(rocksdb: Catalog) -> None:
    workload = tiny("put-get-delete", 2000)
    stored = Experiment.of(rocksdb, workload, study="s")
    recorded = {attrs.SYSTEM: "rocksdb", attrs.WORKLOAD: {"name": workload.name, "records": 2000},
                attrs.EXPERIMENT: stored.doc.record()}
    stored.check_matches(recorded)  # the same experiment resumes
    stored.changed(budget__trials=50, proof__repeats=9).check_matches(recorded)  # so does a new budget or proof
    other = Experiment.of(rocksdb, workload.scaled(3000), study="s", research__settle=False,
                          workload__objective="ops_per_s")
    with pytest.raises(UsageError) as caught:
        other.check_matches(recorded)
    lines = str(caught.value).splitlines()
    assert [line.split(" = ")[0].rsplit(" ", 1)[-1] for line in lines] == \
        ["workload.records", "workload.objective", "research.settle"]
    assert all(line.startswith("study 's' was created with ") and "Fix: " in line for line in lines)
    assert "2,000, not 3,000" in lines[0]


def test_a_bench_arm_is_a_partial_document_given_beside_the_options(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """An arm holds only what it changes (here: the search alone, by random sampling); the bench's own options give
    the rest."""
    arm = tmp_path / "alone-random.toml"
    arm.write_text('[search]\nsampler = "random"\n\n[research]\nrules = false\n')
    document = tomllib.loads(_out(capsys, *TUNE, "--trials", "3", "--experiment", str(arm), "--dry-run",
                                  "--dir", str(tmp_path / "studies")))
    assert document["search"]["sampler"] == "random" and document["research"]["rules"] is False
    assert document["workload"]["name"] == "put-get-delete" and document["budget"] == {"trials": 3}


def test_a_stored_document_reads_as_it_ran_where_a_person_could_not_ask_it(rocksdb: Catalog) -> None:
    """Built in code, an experiment may run the default alone (no trials, no repeats): its study reads back; an
    unknown field in a stored document is still refused."""
    from knobtune.tuning.document import ExperimentError, stored_document

    built = Experiment.of(rocksdb, tiny("put-get-delete", 2000), study="s", budget__trials=0, proof__repeats=0)
    record = {attrs.SYSTEM: "rocksdb", attrs.EXPERIMENT: built.doc.record()}
    assert stored_document(record, "s") == built.doc
    with pytest.raises(ExperimentError, match="unknown field 'budget.trails'"):
        stored_document({**record, attrs.EXPERIMENT: {**built.doc.record(), "budget": {"trails": 1}}}, "s")
