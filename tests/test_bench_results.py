"""The bench suite (bench/suite.py): its question files are valid, every stored result names its commit and machine,
bench/RESULTS.md is what the stored results generate, and no bench page or question holds one machine's path.
Pure Python over stored files: nothing runs a database."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import _stamp  # noqa: E402
import suite  # noqa: E402  (bench/ holds scripts, not a package)

MACHINE_PATH = re.compile(r"(?<![\w.~-])/(work|tmp|root|home)/")


def test_results_md_is_generated_from_the_stored_results() -> None:
    assert suite.RESULTS_MD.read_text() == suite.results_md(), \
        "bench/RESULTS.md differs from what the results generate. Fix: .venv/bin/python bench/run.py --results"


def test_every_question_file_reads_and_names_a_script_and_a_renderer() -> None:
    questions = suite.questions()
    assert len(questions) >= 10
    for question in questions:
        assert question.script.is_file() and callable(question.renderer())
        assert question.command == f".venv/bin/python bench/run.py {question.name}"


def test_every_stored_result_names_its_commit_machine_and_question() -> None:
    names = {q.name for q in suite.questions()}
    folders = [p for p in suite.RESULTS.iterdir() if p.is_dir()]
    assert folders and {p.name for p in folders} <= names, "a results folder with no question file"
    for folder in folders:
        for path in folder.glob("*.json"):
            assert suite.RESULT_NAME.match(path.name), f"{path.name}: not DAY-COMMIT.json"
            stamp = suite.provenance(path)
            assert stamp.get("question") == folder.name, path
            assert re.fullmatch(r"[0-9a-f]{7,40}", stamp.get("commit") or ""), f"{path}: no commit"
            assert path.name.split("-")[1].startswith(stamp["commit"]), f"{path}: named for another commit"
            assert stamp.get("machine"), f"{path}: no machine"
            assert stamp.get("recorded") or stamp.get("recovered") or stamp.get("adopted"), \
                f"{path}: a stamp not recorded by its run says how it was made"


def test_each_section_names_the_commit_the_machine_and_the_raw_file() -> None:
    text = suite.RESULTS_MD.read_text()
    for question in suite.questions():
        path = suite.latest(question.name)
        body = text.split(f"\n## {question.name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"`{question.command}`" in body
        if path is not None:
            stamp = suite.provenance(path)
            assert f"commit `{stamp['commit']}`" in body and "- machine: " in body
            assert f"]({path.relative_to(suite.BENCH).as_posix()})" in body


@pytest.mark.parametrize("change, says", [
    ('asks = "x"', "unknown field 'asked' (did you mean 'asks'?)"),
    ('system = "rocksdb"\n', "no 'system'"),
    ('seeds = [1, 2, 3]', "seeds '1 2 3' is not a list of whole numbers"),
    ('"peers.py"', "run must start with a script of bench/"),
    ('table = "peers.table"', "table 'peers.nothing' is no function"),
    ('budget = "5m"', "budget '7m' is not in its run's arguments"),
    ('"--repeats", "5"]', "names a path of one machine"),
])
def test_a_bad_question_file_is_refused_with_one_line(tmp_path: Path, change: str, says: str) -> None:
    good = (suite.QUESTIONS / "peers.toml").read_text()
    bad = {'asks = "x"': good.replace("asks =", "asked ="),
           'system = "rocksdb"\n': good.replace('system = "rocksdb"\n', ""),
           "seeds = [1, 2, 3]": good.replace("seeds = [1, 2, 3]", 'seeds = "1 2 3"'),
           '"peers.py"': good.replace('"peers.py"', '"peers.sh"'),
           'table = "peers.table"': good.replace('table = "peers.table"', 'table = "peers.nothing"'),
           'budget = "5m"': good.replace('budget = "5m"', 'budget = "7m"'),
           '"--repeats", "5"]': good.replace('"--repeats", "5"]', '"--repeats", "5", "--dir", "/tmp/studies"]')}[change]
    path = tmp_path / "peers.toml"
    path.write_text(bad)
    with pytest.raises(suite.QuestionError) as refused:
        suite.read_question(path)
    message = str(refused.value)
    assert says in message and "Fix:" in message and "\n" not in message
    assert suite.read_question(suite.QUESTIONS / "peers.toml").name == "peers"  # the good file reads


def test_an_adopted_result_is_stamped_named_by_its_commit_and_listed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(suite, "RESULTS", tmp_path)
    source = tmp_path / "made-by-hand.json"
    source.write_text(json.dumps({"seeds": [1]}))
    question = suite.read_question(suite.QUESTIONS / "peers.toml")
    stamp = {"adopted": "run by hand", "commit": "ccf6e1e", "ended": "2026-11-27T23:40:00+00:00",
             "machine": {"cpus": 2}, "quiet": {"quiet": None}, "systems": []}
    path = suite.adopt(question, source, stamp)
    assert path == tmp_path / "peers" / "20261127-ccf6e1e.json"
    assert json.loads(path.read_text())["provenance"] == stamp | {"question": "peers"}
    assert suite.latest("peers") == path
    with pytest.raises(suite.QuestionError, match="Fix: give --commit"):
        suite.adopt(question, source, {**stamp, "commit": ""})


def test_no_bench_page_or_question_names_a_path_of_one_machine() -> None:
    pages = [*(ROOT / "bench").glob("*.md"), *suite.QUESTIONS.glob("*.toml"), ROOT / "docs" / "findings.md"]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in pages for n, line in enumerate(p.read_text().splitlines(), 1)
             if MACHINE_PATH.search(line)]
    assert found == []


def test_the_cpu_outside_a_bench_counts_other_processes_and_not_the_benchs_own_descendants() -> None:
    """``_stamp.Outside`` judges quiet: CPU burnt by a process outside the bench's tree counts; a grandchild of the
    bench stays the bench's once it is orphaned (a server killed by a crash check leaves its backends to init, and
    getrusage never sees their CPU: a PostgreSQL bench looked loaded by its own backends)."""
    burn = "timeout 1.5 sh -c 'while :; do :; done'"
    bench = subprocess.Popen(["bash", "-c", f"{burn} & echo $!; sleep 0.7"], stdout=subprocess.PIPE, text=True)
    watched = _stamp.Outside(every_s=0.1, root=bench.pid)
    other = subprocess.Popen(["bash", "-c", burn])  # outside the bench's tree
    orphan = int((bench.stdout.readline() if bench.stdout else "0").strip())
    bench.wait()  # the burner it started is orphaned now, still burning
    time.sleep(0.4)
    assert watched.is_ours(orphan) and not watched.is_ours(other.pid)
    other.wait()
    time.sleep(0.3)
    assert watched.seconds >= 1.0, watched.seconds  # the other burner's 1.5 s (and whatever else the machine ran)


def test_a_result_names_the_repositorys_files_relative_and_the_home_folder_as_a_tilde(tmp_path: Path) -> None:
    import _cli  # noqa: E402

    out = tmp_path / "result.json"
    _cli.emit({"workload": str(ROOT / "bench" / "workloads" / "inbox-day.toml"),
               "db_bench": str(Path.home() / ".cache" / "knobtune" / "db_bench"), "repo": str(ROOT)}, out)
    written = json.loads(out.read_text())
    assert written["workload"] == "bench/workloads/inbox-day.toml"
    assert written["db_bench"] == "~/.cache/knobtune/db_bench" and written["repo"] == "."
    assert str(ROOT) not in out.read_text() and str(Path.home()) + "/" not in out.read_text()


def test_a_result_names_the_studies_folders_its_steps_ran_in_not_their_paths(tmp_path: Path, monkeypatch) -> None:
    import _cli  # noqa: E402

    monkeypatch.setattr(_cli, "_NAMED", {})
    studies, other = tmp_path / "studies", tmp_path / "elsewhere"
    _cli.named_folder(studies)
    _cli.named_folder(studies / "warm-1")  # inside the first: no name of its own
    _cli.named_folder(other)
    out = tmp_path / "result.json"
    _cli.emit({"home": str(studies), "winner": str(studies / "warm-1" / "winner.json"),
               "other": str(other / "studies.db")}, out)
    written = json.loads(out.read_text())
    assert (written["home"], written["winner"], written["other"]) == ("DIR", "DIR/warm-1/winner.json",
                                                                      "DIR2/studies.db")
    _cli.save_so_far({"runs": [{"home": str(studies)}]}, out)  # a long run's result so far, as a stop leaves it
    assert json.loads(out.read_text()) == {"runs": [{"home": "DIR"}]}


def test_no_stored_result_names_a_path_of_one_machine() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "bench" / "results").rglob("*.json"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if MACHINE_PATH.search(line)]
    assert found == [], "Fix: write results through bench/_cli.py's emit (it names the run's folders DIR)"


def test_the_rounds_of_each_studys_verification_are_recorded_and_counted_by_what_decided_them() -> None:
    """bench/_cli.py's ``verified_speedup`` keeps how a sequential verification went; RESULTS.md's "Verification
    rounds" counts, per question, what decided each verified candidate (issue 57: the verdicts the added rounds
    changed)."""
    import _cli

    def summary(rounds: int, decision: str, stopped: str, won: bool) -> dict:
        speedup = {"ratio": 1.1, "ci_low": 1.01 if won else 0.98, "ci_high": 1.2, "p_value": 0.01, "rounds": rounds,
                   "decision": decision}
        return {"result_trial": 4 if won else None,
                "verification": {"repeats": 5, "max_rounds": 20, "rounds": rounds, "stopped": stopped,
                                 "candidates": [{"label": "default"},
                                                {"label": "trial 4", "speedup": speedup},
                                                {"label": "pgtune", "reference": True, "speedup": speedup}]}}

    proved = _cli.verified_speedup(summary(11, "gain", "settled", won=True))
    assert proved is not None and proved["won"] and proved["label"] == "trial 4"
    assert {k: proved[k] for k in ("first_look", "rounds", "decision", "stopped")} == \
        {"first_look": 5, "rounds": 11, "decision": "gain", "stopped": "settled"}
    fixed = summary(5, "gain", "settled", won=True)
    del fixed["verification"]["max_rounds"]  # an earlier release's fixed comparison: no rounds to tell
    assert "rounds" not in (_cli.verified_speedup(fixed) or {})
    result = {"runs": [{"verified_speedup": v} for v in (
        proved, _cli.verified_speedup(summary(5, "gain", "settled", won=True)),
        _cli.verified_speedup(summary(8, "futile", "futile", won=False)),
        _cli.verified_speedup(summary(19, "open", "budget", won=False)),
        _cli.verified_speedup(summary(14, "no gain", "settled", won=False)))] + [{"verified_speedup": None}]}
    found = suite.verifications_in(result)
    assert [suite._how_decided(v) for v in found] == ["gain", "first", "futile", "open", "no gain"]
    whole = {"summary": summary(14, "no gain", "settled", won=False)["verification"], "verified": proved}
    assert [suite._how_decided(v) for v in suite.verifications_in(whole)] == ["no gain"], \
        "a result holding a whole verification is read from it, once"


def test_a_compared_candidate_is_recorded_with_its_interval_or_why_it_has_none() -> None:
    """bench/_cli.py's ``compared_speedup``, which headroom, peers and earlier-studies record each config of a
    ``compare --json`` with (its candidates as knobtune/tuning/proof/verify.py writes them)."""
    import _cli

    speedup = {"ratio": 1.2, "ci_low": 1.1, "ci_high": 1.3, "p_value": 0.008, "n_base": 5, "n_cand": 5}
    assert _cli.compared_speedup({"label": "a", "failure": None, "speedup": speedup, "significant": True}) == \
        {"ratio": 1.2, "ci_low": 1.1, "ci_high": 1.3, "p_value": 0.008, "significant": True}
    assert _cli.compared_speedup({"label": "b", "failure": "crashed: exit 134", "speedup": speedup,
                                  "significant": False}) == {"failure": "crashed: exit 134"}
    assert _cli.compared_speedup({"label": "c", "failure": None}) == {"failure": "no speedup measured"}
