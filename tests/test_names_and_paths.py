"""Names are names, not paths: study names are checked, every folder made from one stays in the studies folder, and
every file a command writes is in the studies folder or at the path given with -o (its parent folders made)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from knobtune.cli import run
from knobtune.errors import UsageError
from knobtune.names import MAX_NAME_CHARS, inside, name_problem, study_name
from knobtune.storage import open_store


@pytest.mark.parametrize("name", ["pgd", "rocksdb-put-get-delete", "rank-leveldb-ycsb-a", "v1.2_x", "A" * 64])
def test_names_that_are_names(name: str) -> None:
    assert name_problem(name) is None and study_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "a/b", "a\\b", "..", ".", ".hidden", "-flag", "a..b", "with space",
                                  "tab\tname", "new\nline", "é", "x" * (MAX_NAME_CHARS + 1), "/abs", "a/../../b"])
def test_names_that_are_not(name: str) -> None:
    assert name_problem(name) is not None
    with pytest.raises(UsageError, match="a study name is a name, not a path. Fix: "):
        study_name(name)


@pytest.mark.parametrize("escape", ["../x", "../../etc", "a/../../b", "..", "", "/abs/path", "x/y"])
def test_a_folder_made_from_a_name_stays_in_the_studies_folder(tmp_path: Path, escape: str) -> None:
    store = open_store(tmp_path / "studies")
    with pytest.raises(UsageError):
        store.artifacts(escape)
    with pytest.raises(UsageError):
        inside(tmp_path, escape)
    assert store.artifacts("ok-1") == (tmp_path / "studies" / "artifacts" / "ok-1").resolve()


def _all_files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file()}


def test_every_file_written_is_in_the_studies_folder_or_at_its_o_path(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A real (tiny) study, its export, report and a baseline, run from a working folder of their own: every file
    that appears is under --dir or at an -o path (whose missing parent folders are made, the same for every
    command); nothing appears in the working folder, and nothing named after this process stays in /tmp."""
    studies, work, out = tmp_path / "studies", tmp_path / "work", tmp_path / "out"
    work.mkdir()
    monkeypatch.chdir(work)
    before_tmp = set(os.listdir(tempfile.gettempdir()))
    assert run(["tune", "rocksdb", "--workload", "fillrandom", "--records", "1000", "--trials", "1", "--verify-top",
                "0", "--study", "paths", "--dir", str(studies), "--json"]) == 0
    outputs = [out / "a" / "OPTIONS.ini", out / "b" / "c" / "report.html", out / "d" / "guide.json"]
    assert run(["export", "paths", "--format", "rocksdb-options", "-o", str(outputs[0]), "--dir", str(studies)]) == 0
    assert run(["report", "paths", "-o", str(outputs[1]), "--dir", str(studies)]) == 0
    assert run(["baseline", "rocksdb", "-o", str(outputs[2])]) == 0
    written = _all_files(tmp_path)
    outside = {path for path in written if studies not in path.parents}
    assert outside == {*outputs, outputs[1].with_suffix(".json")}, outside
    assert all(output.is_file() for output in outputs)
    assert (studies / "artifacts" / "paths").is_dir() and not list(work.iterdir())
    pid = str(os.getpid())
    assert not {e for e in set(os.listdir(tempfile.gettempdir())) - before_tmp if re.search(rf"\b{pid}\b", e)}
