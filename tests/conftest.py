"""Shared fixtures: the real catalog, tiny workloads, a private studies folder."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knobtune.knobs import Catalog, load_catalog
from knobtune.storage import StudyStore, open_store
from knobtune.workloads import Workload, load_workload

CORPUS = Path(__file__).parent / "corpus"


@contextlib.contextmanager
def cache_of_its_own(folder: Path) -> Iterator[None]:
    """``KNOBTUNE_CACHE`` pointed at ``folder`` while the block runs (a test's restored data kept apart)."""
    before = os.environ.get("KNOBTUNE_CACHE")
    os.environ["KNOBTUNE_CACHE"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KNOBTUNE_CACHE", None)
        else:
            os.environ["KNOBTUNE_CACHE"] = before


@pytest.fixture(scope="session")
def rocksdb() -> Catalog:
    return load_catalog("rocksdb")


@pytest.fixture()
def store(tmp_path: Path) -> StudyStore:
    return open_store(tmp_path / "studies")


TEST_DATA_SCALE = 2  # a server workload's data at most this scale (pgbench: 200,000 accounts; TPC-C: 2 warehouses)
TEST_CLIENTS = 4
TEST_TABLE_ROWS = 2000  # a sysbench workload's rows per table


def tiny(name: str, records: int) -> Workload:
    """A shipped workload shrunk to ``records`` at full size (seconds, not minutes); a server workload's data
    (its driver's ``scale``), clients and a warm-up (never longer than the run) shrunk too: the shipped sizes are for
    settings to matter, not for tests."""
    workload = load_workload(name).scaled(records)
    drivers = {driver: {**section, **({"scale": min(int(section["scale"]), TEST_DATA_SCALE)} if "scale" in section
                                      else {}),
                        **({"clients": min(int(section["clients"]), TEST_CLIENTS)} if "clients" in section else {}),
                        **({"table_size": min(int(section["table_size"]), TEST_TABLE_ROWS)} if "table_size" in section
                           else {}),
                        **({"warm_up_operations": min(int(section["warm_up_operations"]), workload.operations)}
                           if "warm_up_operations" in section else {})}
               for driver, section in workload.drivers.items()}
    return dataclasses.replace(workload, drivers=drivers)


@pytest.fixture()
def tiny_pgd() -> Workload:
    return tiny("put-get-delete", 4000)


def kill_while(pid: int, holds: Callable[[], object], limit_s: float) -> object:
    """SIGKILL process ``pid`` at a moment ``holds()`` is true (what it returned then), waiting up to ``limit_s``.

    A run of a small rung lasts a fraction of a second: between a look that finds it and a kill it may end. The
    process is paused (SIGSTOP: it can start and end nothing of its own) and looked at again; only if ``holds()``
    is still true is it killed, else it is resumed and looked at again. Returns a false value if ``holds`` never
    held or the process ended first."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if holds():
            os.kill(pid, signal.SIGSTOP)
            try:
                seen = holds()
            except BaseException:  # a look that fails leaves no paused process behind
                os.kill(pid, signal.SIGCONT)
                raise
            if seen:
                os.kill(pid, signal.SIGKILL)
                return seen
            os.kill(pid, signal.SIGCONT)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        time.sleep(0.05)
    return None
