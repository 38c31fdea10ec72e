"""Starting configs from a workload's shape: the point-lookup file, its errors, and which targets offer it (nothing run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.errors import CatalogError
from knobtune.knobs import load_catalog
from knobtune.targets.rocksdb.known import point_lookup_starts
from knobtune.targets import make_target
from knobtune.workloads import load_workload

ROCKSDB = load_catalog("rocksdb")
GIB = 1 << 30


def test_the_buffers_hold_most_of_the_data_set_in_a_hash_memtable_with_and_without_universal() -> None:
    starts = point_lookup_starts(ROCKSDB, GIB, key_size=16)
    assert list(starts) == ["rocksdb-point-lookups", "rocksdb-point-lookups-universal"]
    level, universal = starts.values()
    assert level["memtablerep"] == "hash_linkedlist" and level["allow_concurrent_memtable_write"] is False
    assert level["write_buffer_size"] == int(0.4 * GIB) and "compaction_style" not in level
    assert universal == {**level, "compaction_style": "universal"}
    for changed in starts.values():
        ROCKSDB.config(changed)  # every relation holds (hash buckets against the buffer's size)


def test_data_sized_knobs_keep_to_the_default_and_the_range() -> None:
    small = point_lookup_starts(ROCKSDB, 10 << 20, key_size=24)["rocksdb-point-lookups"]
    assert "write_buffer_size" not in small  # 4 MiB is below the default's 64 MiB: the default stays
    huge = point_lookup_starts(ROCKSDB, 100 * GIB, key_size=24)["rocksdb-point-lookups"]
    assert huge["write_buffer_size"] == ROCKSDB["write_buffer_size"].max


def test_keys_shorter_than_the_hashed_prefix_and_other_systems_get_none() -> None:
    assert point_lookup_starts(ROCKSDB, GIB, key_size=8) == {}
    assert point_lookup_starts(load_catalog("leveldb"), GIB, key_size=24) == {}


@pytest.mark.parametrize(("edit", "message"), [
    (("write_buffer_size = 0.4", "write_buffer_size = 1.5"), "not a fraction of the data set"),
    (('memtablerep = "hash_linkedlist"', 'memtable_kind = "hash_linkedlist"'), "memtable_kind"),
    (("[variants.", "[variant."), "at least one [variants] table"),
])
def test_a_broken_file_names_itself_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                edit: tuple[str, str], message: str) -> None:
    import knobtune.targets.rocksdb.known as starts

    original = (starts.DATA_DIR / "rocksdb-point-lookups.toml").read_text()
    assert edit[0] in original
    (tmp_path / "rocksdb-point-lookups.toml").write_text(original.replace(*edit))
    monkeypatch.setattr(starts, "DATA_DIR", tmp_path)
    with pytest.raises(CatalogError, match="rocksdb-point-lookups.toml") as caught:
        point_lookup_starts(ROCKSDB, GIB, key_size=16)
    assert message in str(caught.value) and "Fix:" in str(caught.value)


@pytest.mark.parametrize(("workload", "driver", "offered"), [
    ("put-get-delete", "db_bench", True),
    ("readrandom", "db_bench", True),
    ("fillrandom", "db_bench", False),  # no reads: the reopen replays what the buffers held (0.81x measured)
    ("ycsb-c", "kvbench", True),
    ("ycsb-a", "kvbench", True),
    ("ycsb-e", "kvbench", False),  # scans
    ("readseq", "kvbench", False),
])
def test_a_target_offers_them_to_workloads_that_read_single_keys_and_never_scan(
        tmp_path: Path, workload: str, driver: str, offered: bool) -> None:
    target = make_target(ROCKSDB, load_workload(workload), tmp_path, driver)
    known = target.known_configs()
    assert ("rocksdb-point-lookups-universal" in [k.label for k in known]) is offered
    heuristics = ["rocksdb-guide"] if driver == "db_bench" else []  # only they are verified beside, and come first
    assert [k.label for k in known if k.beside] == [k.label for k in known[:len(heuristics)]] == heuristics
    assert all(k.source for k in known)


def test_a_memory_limit_below_their_plan_leaves_them_out(tmp_path: Path) -> None:
    target = make_target(ROCKSDB, load_workload("put-get-delete"), tmp_path, "db_bench", memory_limit_bytes=512 << 20)
    assert [k.label for k in target.known_configs()] == ["rocksdb-guide"]


def test_a_verdict_names_the_known_config_the_result_is() -> None:
    from knobtune.analysis import noise, speedup
    from knobtune.tuning.finish import verdict
    from knobtune.tuning.verify import Candidate, CandidateRuns, Comparison
    from knobtune.workloads import Objective, Rung

    default = CandidateRuns(Candidate("default", {}), values=[6.0, 6.2, 5.9, 6.1, 6.0])
    started = CandidateRuns(Candidate("trial 3", {"memtablerep": "hash_linkedlist"},
                                      tried_first="rocksdb-point-lookups-universal"), values=[3.3, 3.4, 3.2, 3.3, 3.5])
    searched = CandidateRuns(Candidate("trial 9", {"block_size": 8192}), values=[5.9, 6.1, 6.0, 6.0, 5.8])
    runs = (default, started, searched)
    comparison = Comparison(Objective.ELAPSED_S, Rung(2, 1.0, 100), 5, runs,
                            {r.candidate.label: speedup(default.values, r.values, False) for r in runs[1:]},
                            noise(default.values))
    assert verdict(comparison).startswith("trial 3 (rocksdb-point-lookups-universal, tried first) is 1.8")
    assert comparison.to_dict()["candidates"][1]["tried_first"] == "rocksdb-point-lookups-universal"
    assert "tried_first" not in comparison.to_dict()["candidates"][2]  # the search's own config
