"""What an ``-o`` may overwrite, and what knobtune writes there: its own files again (they carry its mark), a user's
file only with ``--force``, a studies database or a capture never; ``report -o`` writes what its suffix says.
The refusals themselves are cases of test_bad_inputs.py; this file checks what still works, in-process, on the
stored study (no study is run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from knobtune.cli import run
from knobtune.outputs import OutputFile, Written, is_sqlite, text_mark, written_by_knobtune
from knobtune.report import load_config_file
from knobtune.storage import open_store

from conftest import CORPUS


@pytest.fixture()
def studies(tmp_path: Path) -> Path:
    folder = tmp_path / "studies"
    folder.mkdir()
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", folder / "studies.db")
    return folder


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = run(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_an_export_is_written_again_over_its_own_file(studies: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for format_name, name in (("json", "result.json"), ("rocksdb-options", "OPTIONS.ini")):
        path = tmp_path / name
        for _ in range(2):
            status, _, err = _run(capsys, "export", "old-release", "--format", format_name, "-o", str(path),
                                  "--dir", str(studies))
            assert status == 0, err
        assert written_by_knobtune(OutputFile(path, Written.JSON if format_name == "json" else Written.TEXT, "#"))
    assert json.loads((tmp_path / "result.json").read_text())["written_by"].startswith("knobtune ")
    assert (tmp_path / "OPTIONS.ini").read_text().startswith(text_mark("#") + "\n")


def test_force_overwrites_a_users_file_and_never_a_studies_database(studies: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "data"}\n')
    status, _, err = _run(capsys, "export", "old-release", "-o", str(mine), "--dir", str(studies))
    assert status == 2 and "add --force" in err and mine.read_text() == '{"my": "data"}\n'
    status, _, err = _run(capsys, "export", "old-release", "-o", str(mine), "--force", "--dir", str(studies))
    assert status == 0, err
    assert json.loads(mine.read_text())["study"] == "old-release"
    before = (studies / "studies.db").read_bytes()
    status, _, err = _run(capsys, "baseline", "rocksdb", "-o", str(studies / "studies.db"), "--force")
    assert status == 2 and "SQLite database" in err and (studies / "studies.db").read_bytes() == before


def test_report_writes_what_its_suffix_says(studies: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "report", "old-release", "-o", str(tmp_path / "x.json"), "--dir", str(studies))
    assert status == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["studies", "x.json"]  # the JSON alone, no page over it
    data = json.loads((tmp_path / "x.json").read_text())
    assert data["summary"]["study"] == "old-release" and data["written_by"].startswith("knobtune ")
    status, _, err = _run(capsys, "report", "old-release", "-o", str(tmp_path / "r.html"), "--dir", str(studies))
    assert status == 0, err
    page, beside = tmp_path / "r.html", tmp_path / "r.json"
    assert page.read_text().startswith("<!DOCTYPE html>") and json.loads(beside.read_text())["summary"]
    assert written_by_knobtune(OutputFile(page, Written.HTML)) and written_by_knobtune(OutputFile(beside, Written.JSON))
    status, _, err = _run(capsys, "report", "old-release", "-o", str(page), "--dir", str(studies))
    assert status == 0, err  # its own page and JSON: written again


def test_a_baseline_file_is_marked_and_compare_reads_its_config(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "guide.json"
    status, _, err = _run(capsys, "baseline", "rocksdb", "-o", str(path))
    assert status == 0, err
    assert written_by_knobtune(OutputFile(path, Written.JSON))
    assert load_config_file(path, "rocksdb") == json.loads(path.read_text())["config"]


@pytest.mark.parametrize(("text", "written", "comment", "owned"), [
    ("# written by knobtune 0.4.0\nmax_background_jobs=4\n", Written.TEXT, "#", True),
    ("-- written by knobtune 0.4.0\nALTER SYSTEM SET work_mem = '8MB';\n", Written.TEXT, "--", True),
    ("# my own OPTIONS\n# written by knobtune 0.4.0\n", Written.TEXT, "#", False),  # not its first line
    ("--max_background_jobs=4\n", Written.TEXT, None, False),  # a format without comments carries no mark
    ('{"written_by": "knobtune 0.4.0", "config": {}}', Written.JSON, None, True),
    ('{"written_by": "someone else"}', Written.JSON, None, False),
    ('["written_by", "knobtune 0.4.0"]', Written.JSON, None, False),
    ('<!DOCTYPE html><html><head><meta name="generator" content="knobtune 0.4.0">', Written.HTML, None, True),
    ("<!DOCTYPE html><html><head><title>knobtune report</title>", Written.HTML, None, False),
])
def test_knobtune_tells_its_own_files_by_format_and_mark(tmp_path: Path, text: str, written: Written,
                                                         comment: str | None, owned: bool) -> None:
    path = tmp_path / "file"
    path.write_text(text)
    assert written_by_knobtune(OutputFile(path, written, comment)) is owned


def test_a_store_makes_nothing_until_it_is_written(tmp_path: Path) -> None:
    store = open_store(tmp_path / "new" / "studies")
    assert store.find("anything") is None
    assert not (tmp_path / "new").exists()
    store.storage()
    assert is_sqlite(tmp_path / "new" / "studies" / "studies.db")
