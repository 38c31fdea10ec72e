"""Diagnosis rules, counter descriptions, known configs and bench questions read through the schema: every shipped
file of each kind reads; a corpus of broken files (a misspelt field and a wrong type at every depth, and other
mistakes, each a class of its own) is refused in one line naming the file, the field and the fix; odd but valid
files (a UTF-8 byte order mark, very long values) are accepted; and docs/files.md is what the schema generates."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from knobtune.analysis.diagnosis import load_rules
from knobtune.errors import CatalogError, KnobtuneError
from knobtune.file_kinds import FILE_KINDS, page, source_tree_kinds
from knobtune.targets import Machine, described_counters, fixed_config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402  (bench/ holds scripts, not a package)

SYSTEMS = ROOT / "knobtune" / "systems"
MACHINE = Machine(8 << 30, 4)

RULES = '''
[[rules]]
name = "stalls"
when = "stall_share > 0.1"
finding = "writes stalled {stall_share:.0%} of the run"
source = "a page"

[[rules.suggest]]
knob = "max_background_jobs"
direction = "up"
high = "2 * cores"

[[rules.starts]]
label = "bigger-buffers"
config = { max_background_jobs = 4 }
sized = { write_buffer_size = "0.4 * data_bytes" }
'''

COUNTERS = '''
[counters.stall_s]
meaning = "seconds writes stalled"
unit = "s"
read = "ticker rocksdb.stall.micros"

[counters.stall_share]
meaning = "the share of the run writes stalled"
unit = "ratio"
read = "knobtune: stall_s / workload seconds"
'''

KNOWN = '''
[source]
repository = "facebook/rocksdb"
file = "tools/benchmark.sh"
tag = "v7.8.3"
commit = "bf2c335184de16a3cc1787fa97ef9f22f7114238"
what = "its write benchmarks' settings"

[config]
max_background_jobs = 16
write_buffer_size = "128MiB"

[left_out]
verify_checksum = "not in the catalog"
'''

QUESTION = (ROOT / "bench" / "questions" / "peers.toml").read_text()


def _rules(path: Path) -> object:
    return load_rules(path, {"stall_share": {}, "stall_s": {}})


def _counters(path: Path) -> object:
    return described_counters(path)


def _known(path: Path) -> object:
    return fixed_config("rocksdb", path, MACHINE)


KINDS: dict[str, tuple[str, Callable[[Path], object], str]] = {  # kind -> (a good file, its reader, its file name)
    "rules": (RULES, _rules, "rules.toml"), "counters": (COUNTERS, _counters, "counters.toml"),
    "known": (KNOWN, _known, "known.toml"), "question": (QUESTION, suite.read_question, "peers.toml")}

BROKEN = [  # (kind, what is replaced, by what, the one line): each a mistake of its own
    # rules: a misspelt field and a wrong type at each depth (the file, a rule, a suggestion, a start)
    ("rules", "", 'rule = []\n', r"unknown field 'rule' \(did you mean 'rules'\?\)"),
    ("rules", "*", 'rules = "stalls"\n', r"rules.toml: rules is not a list of tables"),
    ("rules", 'when = "', 'whne = "', r"unknown field 'rules #1.whne' \(did you mean 'when'\?\)"),
    ("rules", 'source = "a page"', "source = 3", r"rules #1.source 3 is not text"),
    ("rules", 'direction = "up"', 'direction = "up"\nhihg = 4',
     r"'rules #1.suggest #1.hihg' \(did you mean 'high'\?\)"),
    ("rules", 'high = "2 * cores"', "high = true", r"suggest #1.high True is not a number or text"),
    ("rules", "label =", "lable =", r"unknown field 'rules #1.starts #1.lable' \(did you mean 'label'\?\)"),
    ("rules", '"0.4 * data_bytes"', "0.4", r"starts #1.sized.write_buffer_size 0.4 is not text"),
    ("rules", "config = { max_background_jobs = 4 }", 'config = "max_background_jobs=4"',
     r"starts #1.config is not a table"),
    ("rules", '"a page"', '"   "', r"rules #1.source '   ' is not text \(not blank\)"),
    ("rules", 'direction = "up"', 'direction = "upward"',
     r"direction 'upward' is not a direction. Fix: use one of up, down, to"),
    ("rules", 'direction = "up"\nhigh = "2 * cores"', 'direction = "to"', r"moves max_background_jobs 'to' no value"),
    ("rules", "\n[[rules.suggest]]", '\n[[rules]]\nname = "stalls"\nwhen = "1"\nfinding = "x"\nsource = "y"\n'
     '[[rules.suggest]]', r"rules #2 \(stalls\): repeats a rule name"),
    ("rules", '"stall_share > 0.1"', '"__import__(1)"', r"calls __import__. Fix: use only min, max"),
    ("rules", '"2 * cores"', '"2 * coers"', r"reads coers, neither a counter of the system nor a shape name"),
    ("rules", "config = { max_background_jobs = 4 }\nsized = { write_buffer_size = \"0.4 * data_bytes\" }", "",
     r"starts #1 \(bigger-buffers\) has no config"),
    # counters
    ("counters", "[counters.stall_s]", "[counter.stall_s]", r"unknown field 'counter' \(did you mean 'counters'\?\)"),
    ("counters", 'meaning = "seconds', 'meanign = "seconds',
     r"unknown field 'counters.stall_s.meanign' \(did you mean 'meaning'\?\)"),
    ("counters", 'unit = "s"', "unit = 1", r"counters.stall_s.unit 1 is not text"),
    ("counters", 'unit = "s"', 'unit = "seconds"', r"unit 'seconds' is not a counter's unit"),
    ("counters", 'unit = "ratio"', 'unit = "ratios"', r"unit 'ratios' is not a counter's unit \(did you mean 'ratio'"),
    ("counters", 'read = "ticker rocksdb.stall.micros"\n', "", r"no 'counters.stall_s.read'. Fix: add it"),
    ("counters", 'read = "ticker rocksdb.stall.micros"', 'read = ""', r"counters.stall_s.read '' is not text"),
    ("counters", "[counters.stall_s]\n", 'stall_s = "seconds"\n[counters.x]\n', r"unknown field 'stall_s'"),
    ("counters", '[counters.stall_share]\nmeaning = "the share of the run writes stalled"\nunit = "ratio"\n'
     'read = "knobtune: stall_s / workload seconds"', "[counters]\nstall_share = 0.5",
     r"counters.stall_share is not a table"),
    ("counters", 'meaning = "seconds writes stalled"', 'meaning = ["seconds"]', r"meaning \['seconds'\] is not text"),
    ("counters", 'unit = "s"', 'unit = "s"\nunits = "s"', r"'counters.stall_s.units' \(did you mean 'unit'\?\)"),
    # known configs
    ("known", "[source]", "[sources]", r"unknown field 'sources' \(did you mean 'source'\?\)"),
    ("known", "*", KNOWN[KNOWN.index("[config]"):], r"no \[source\]. Fix: add it \(docs/files.md\)"),
    ("known", 'tag = "v7.8.3"', 'tga = "v7.8.3"', r"unknown field 'source.tga' \(did you mean 'tag'\?\)"),
    ("known", 'tag = "v7.8.3"', "tag = 7.8", r"source.tag 7.8 is not text"),
    ("known", '"bf2c335184de16a3cc1787fa97ef9f22f7114238"', '"bf2c335"', r"source.commit 'bf2c335' is not a commit"),
    ("known", '"facebook/rocksdb"', '"rocksdb"', r"source.repository 'rocksdb' is not a repository \(owner/name\)"),
    ("known", 'what = "its write benchmarks\' settings"\n', "", r"\[source\] gives no page and no what"),
    ("known", "[left_out]\nverify_checksum = \"not in the catalog\"", "[left_out]\nverify_checksum = false",
     r"left_out.verify_checksum False is not text"),
    ("known", "[left_out]", "[leftout]", r"unknown field 'leftout' \(did you mean 'left_out'\?\)"),
    ("known", "[config]\nmax_background_jobs = 16\nwrite_buffer_size = \"128MiB\"", "[config]",
     r"no \[config\] \(or an empty one\)"),
    ("known", "max_background_jobs = 16", "max_background_job = 16", r"unknown knob 'max_background_job'"),
    ("known", "*", 'config = "max_background_jobs=16"\n' + KNOWN[:KNOWN.index("[config]")],
     r"known.toml: config is not a table"),
    # bench questions
    ("question", "asks =", "ask =", r"unknown field 'ask' \(did you mean 'asks'\?\)"),
    ("question", 'system = "rocksdb"', 'system = "rocksdbb"', r"system 'rocksdbb' is not a system of knobtune"),
    ("question", 'system = "rocksdb"', "system = 1", r"system 1 is not text"),
    ("question", "seeds = [1, 2, 3]", 'seeds = ["1", "2", "3"]', r"seeds \['1', '2', '3'\] is not a list of whole"),
    ("question", "seeds = [1, 2, 3]", "seeds = [1, 1, 3]", r"seeds names 1 twice"),
    ("question", "seeds = [1, 2, 3]", "seeds = [1, true, 3]", r"seeds \[1, True, 3\] is not a list of whole numbers"),
    ("question", 'table = "peers.table"', 'table = "table"', r"table 'table' is not a script's function"),
    ("question", 'table = "peers.table"\n', "", r"no 'table'. Fix: add it, e.g. table = \"peers.table\""),
    ("question", 'budget = "5m"', "budget = 5", r"budget 5 is not text"),
    ("question", "issues = [17, 32]", 'issues = "32"', r"issues '32' is not a list of whole"),
    ("question", QUESTION[QUESTION.index("takes ="):QUESTION.index("\nneeds")], "takes = 60", r"takes 60 is not text"),
    ("question", 'arms = ["', 'arms = [" ", "', r"arms .* holds an empty name"),
]


def _write(tmp_path: Path, kind: str, old: str, new: str) -> Path:
    good, _, name = KINDS[kind]
    assert old in good or old == "*", old
    path = tmp_path / name
    path.write_text(new if old == "*" else good.replace(old, new, 1) if old else new + good)  # "": new goes first
    return path


@pytest.mark.parametrize(("kind", "old", "new", "message"), BROKEN,
                         ids=[f"{k}-{re.sub(r'[^a-z]+', '-', m[:40].lower()).strip('-')}" for k, _, _, m in BROKEN])
def test_a_broken_file_of_each_kind_gets_one_line_naming_the_field_and_the_fix(tmp_path, kind, old, new,
                                                                                message) -> None:
    path = _write(tmp_path, kind, old, new)
    with pytest.raises(KnobtuneError) as caught:
        KINDS[kind][1](path)
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text), text
    assert path.name in text and "Fix: " in text


def test_the_corpus_has_ten_mistakes_of_each_kind() -> None:
    assert all(sum(k == kind for k, _, _, _ in BROKEN) >= 10 for kind in KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_good_file_of_each_kind_reads_and_so_does_one_with_a_byte_order_mark_and_long_values(tmp_path,
                                                                                                kind) -> None:
    good, reader, name = KINDS[kind]
    path = tmp_path / name
    path.write_text(good)
    assert reader(path)
    long = "x" * 20_000
    odd = good.replace('"a page"', f'"{long}"').replace('"seconds writes stalled"', f'"{long}"').replace(
        "its write benchmarks' settings", long).replace("about an hour", long)
    assert odd != good
    other = tmp_path / "odd" / name
    other.parent.mkdir()
    other.write_bytes(b"\xef\xbb\xbf" + odd.encode())
    assert reader(other)


def test_a_file_that_is_not_utf8_is_refused_in_one_line(tmp_path) -> None:
    for kind, (good, reader, name) in KINDS.items():
        path = tmp_path / kind / name
        path.parent.mkdir()
        path.write_bytes(good.replace('"', '"\xe9', 1).encode("latin-1"))
        with pytest.raises(KnobtuneError, match=r"not UTF-8 text \(byte \d+\). Fix: give a TOML file saved as UTF-8"):
            reader(path)


@pytest.mark.parametrize("path", sorted(SYSTEMS.glob("*/rules.toml")), ids=lambda p: p.parent.name)
def test_every_shipped_rules_file_reads_through_the_schema(path: Path) -> None:
    counters = described_counters(path.with_name("counters.toml"))
    assert counters and load_rules(path, counters)


@pytest.mark.parametrize("path", sorted(SYSTEMS.glob("rocksdb/*.toml")), ids=lambda p: p.stem)
def test_every_shipped_known_config_reads_through_the_schema(path: Path) -> None:
    if path.stem in ("catalog", "rules", "counters"):
        return
    known = fixed_config("rocksdb", path, MACHINE)
    assert known.config and known.source


def test_a_rules_file_names_only_counters_its_system_describes() -> None:
    """The semantic check beside the schema: rocksdb's rules read against leveldb's counters name what lacks."""
    with pytest.raises(CatalogError, match=r"neither a counter of the system nor a shape name"):
        load_rules(SYSTEMS / "rocksdb" / "rules.toml", described_counters(SYSTEMS / "leveldb" / "counters.toml"))


def test_docs_files_md_is_what_the_schema_generates() -> None:
    kinds = source_tree_kinds()
    assert set(FILE_KINDS) < set(kinds) and any(k.document is suite.QuestionDoc for k in kinds)
    assert (ROOT / "docs" / "files.md").read_text() == page(kinds), \
        "docs/files.md differs from what the schema generates. Fix: .venv/bin/python -m knobtune.file_kinds > " \
        "docs/files.md"
